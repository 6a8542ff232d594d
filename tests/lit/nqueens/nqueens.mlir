// nqueens.i32 through the executor, on the single-threaded and the multi-threaded queue.
// RUN: bef_executor %s.bef | FileCheck %s
// RUN: bef_executor --work_queue_type=mstd:2 %s.bef | FileCheck %s

// CHECK-LABEL: --- Running 'nqueens_8'
func.func @nqueens_8() {
  %ch0 = tfrt.new.chain
  %n = tfrt.constant.i32 8
  %levels = tfrt.constant.i32 2
  %count = "nqueens.i32"(%n, %levels) : (i32, i32) -> i32
  // CHECK: int32 = 92
  %ch1 = tfrt.print.i32 %count, %ch0
  tfrt.return
}

// CHECK-LABEL: --- Running 'nqueens_10_returned'
func.func @nqueens_10_returned() -> i32 {
  %n = tfrt.constant.i32 10
  %levels = tfrt.constant.i32 3
  %count = "nqueens.i32"(%n, %levels) : (i32, i32) -> i32
  tfrt.return %count : i32
}
// CHECK: 'nqueens_10_returned' returned 724

// CHECK-LABEL: --- Running 'nqueens_python_6'
func.func @nqueens_python_6() -> i32 {
  %n = tfrt.constant.i32 6
  %levels = tfrt.constant.i32 6
  %count = "nqueens.python.i32"(%n, %levels) : (i32, i32) -> i32
  tfrt.return %count : i32
}
// CHECK: 'nqueens_python_6' returned 4

// CHECK-LABEL: --- Running 'nqueens_1_0'
func.func @nqueens_1_0() -> i32 {
  %n = tfrt.constant.i32 1
  %levels = tfrt.constant.i32 0
  %count = "nqueens.i32"(%n, %levels) : (i32, i32) -> i32
  tfrt.return %count : i32
}
// CHECK: 'nqueens_1_0' returned 1
