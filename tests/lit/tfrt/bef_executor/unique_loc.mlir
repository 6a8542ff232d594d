// RUN: bef_executor_lite %s.bef 2>&1 | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_executor/unique_loc.mlir: every kernel
// gets its own location record even when all of them are `loc(unknown)`.

// CHECK-LABEL: --- Running 'unique_loc'
func.func @unique_loc() -> !tfrt.chain {
  %ch0 = "tfrt_test.unique_loc"() {name = "a"} : () -> !tfrt.chain loc(unknown)
  %ch1 = "tfrt_test.unique_loc"() {name = "b"} : () -> !tfrt.chain loc(unknown)
  %ch2 = "tfrt_test.unique_loc"() {name = "c"} : () -> !tfrt.chain loc(unknown)
  %ch3 = tfrt.merge.chains %ch0, %ch1, %ch2 : !tfrt.chain, !tfrt.chain, !tfrt.chain
  // CHECK-NEXT: 'unique_loc' returned !tfrt.chain value
  tfrt.return %ch3 : !tfrt.chain
}
