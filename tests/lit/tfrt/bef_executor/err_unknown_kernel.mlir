// RUN: bef_executor_lite %s.bef

// Reconstruction of TFRT's mlir_tests/bef_executor/err_unknown_kernel.mlir: an unknown
// kernel is diagnosed at its location while the BEF file is loaded; the driver exits 0 only
// because the expected-error annotation matches.

func.func @unknown_kernel() -> i32 {
  // expected-error @+1 {{runtime error: unknown kernel name 'tfrt.unknown_kernel'}}
  %x = "tfrt.unknown_kernel"() : () -> i32
  tfrt.return %x : i32
}
