// The playground's 2020 syntax (func, hex.*) runs the same kernel.
// RUN: bef_executor --work_queue_type=mstd:2 %s.bef | FileCheck %s

// CHECK: --- Running 'nqueen'
// CHECK-NEXT: int32 = 724
func @nqueen() {
  %ch0 = hex.new.chain
  %n = hex.constant.i32 10
  %l = hex.constant.i32 4
  %s = "nqueens.i32"(%n, %l) : (i32, i32) -> i32
  %ch1 = hex.print.i32 %s, %ch0
  hex.return
}
