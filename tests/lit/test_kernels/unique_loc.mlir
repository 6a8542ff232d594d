// Every op has its own location (one BEF location record per op), even loc(unknown) ones:
// tfrt_test.unique_loc fails if two ops with different names share one (docs/bef.md, docs/conformance.md).
// RUN: bef_executor %s.bef 2>&1 | FileCheck %s

// CHECK-LABEL: --- Running 'unique_loc'
func.func @unique_loc() -> !tfrt.chain {
  %ch0 = "tfrt_test.unique_loc"() {name = "a"} : () -> !tfrt.chain loc(unknown)
  %ch1 = "tfrt_test.unique_loc"() {name = "b"} : () -> !tfrt.chain loc(unknown)
  %ch2 = "tfrt_test.unique_loc"() {name = "c"} : () -> !tfrt.chain loc(unknown)
  %ch = tfrt.merge.chains %ch0, %ch1, %ch2 : !tfrt.chain, !tfrt.chain, !tfrt.chain
  // CHECK-NOT: error
  // CHECK: 'unique_loc' returned !tfrt.chain value
  tfrt.return %ch : !tfrt.chain
}
