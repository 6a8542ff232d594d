// RUN: cat %s.bef > /dev/null

// Reconstruction of TFRT's mlir_tests/mlir_to_bef/modules.mlir (spec 3.9): a nested module with
// the `tfrt.compiled` attribute, referenced by a kernel's symbol attribute, is encoded as a
// compilation unit.

module @kernels attributes {tfrt.compiled} {
  func.func @main(%arg0: i32) -> i32 {
    func.return %arg0 : i32
  }
}

func.func @compiled_module() {
  "simple.kernel"() {kernel = @kernels::@main} : () -> ()
  tfrt.return
}
