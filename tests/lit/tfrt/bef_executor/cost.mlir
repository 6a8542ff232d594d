// RUN: bef_executor_lite %s.bef 2>&1 | FileCheck %s --dump-input=fail
// RUN: tfrt_opt %s | tfrt_opt

// Reconstruction of TFRT's mlir_tests/bef_executor/cost.mlir: the `_tfrt_cost`
// attribute of tfrt_test.test_cost.

// CHECK-LABEL: --- Running 'test_cost'
func.func @test_cost() -> i32 {
  %c0 = tfrt.constant.i32 0
  // CHECK-NEXT: id: 7
  %c1 = tfrt_test.test_cost %c0 {id = 7 : i64, _tfrt_cost = 100 : i64} : i32
  tfrt.return %c1 : i32
}
