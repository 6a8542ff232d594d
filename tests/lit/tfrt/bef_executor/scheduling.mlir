// RUN: bef_executor_lite --work_queue_type=mstd %s.bef 2>&1 | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_executor/scheduling.mlir (docs/executor.md,
// Scheduling): LIFO processing of the inline queue, and kernels of other streams running on
// worker threads.

module attributes {tfrt.cost_threshold = 10 : i64} {

// CHECK-LABEL: --- Running 'lifo_scheduling'
func.func @lifo_scheduling() -> !tfrt.chain {
  %c0 = tfrt.constant.i32 0
  // CHECK-NEXT: id: 0
  // CHECK-NEXT: id: 2
  // CHECK-NEXT: id: 1
  %c1 = tfrt_test.test_cost %c0 {id = 0 : i64, _tfrt_cost = 1 : i64} : i32
  %c2 = tfrt_test.test_cost %c0 {id = 1 : i64, _tfrt_cost = 1 : i64} : i32
  %c3 = tfrt_test.test_cost %c1 {id = 2 : i64, _tfrt_cost = 1 : i64} : i32
  %ch = tfrt.merge.chains %c2, %c3 : i32, i32
  tfrt.return %ch : !tfrt.chain
}

// CHECK-LABEL: --- Running 'print_thread_id'
func.func @print_thread_id() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %t = "tfrt_test.get_thread_id"(%ch0) : (!tfrt.chain) -> (i32)
  // CHECK-NEXT: int32 = 0
  %ch1 = tfrt.print.i32 %t, %ch0
  %t0 = "tfrt_test.get_thread_id"(%ch1) : (!tfrt.chain) -> (i32)
  // CHECK-NEXT: int32 = 0
  %ch2 = tfrt.print.i32 %t0, %ch1
  %t1 = "tfrt_test.get_thread_id"(%ch0) : (!tfrt.chain) -> (i32)
  %ch3 = tfrt.merge.chains %ch2, %t1 : !tfrt.chain, i32
  // CHECK-NEXT: int32 = 1
  %ch4 = tfrt.print.i32 %t1, %ch3
  tfrt.return %ch4 : !tfrt.chain
}

}
