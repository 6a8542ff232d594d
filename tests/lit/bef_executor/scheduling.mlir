// Scheduling order of the executor (docs/executor.md): LIFO processing of ready kernels of the current
// stream (depth first), users of one value in program order, zero-operand kernels of the
// pseudo kernel's stream last-first.
// RUN: bef_executor %s.bef 2>&1 | FileCheck %s
// RUN: bef_executor --work_queue_type=mstd:2 %s.bef 2>&1 | FileCheck %s --check-prefix=MSTD
// The ops below are not in the return's stream, so under "s" they run as a queued task when the
// driver quiesces, after the result line.  Under mstd the result line may come at any point.

module attributes {tfrt.cost_threshold = 10 : i64} {

// TFRT's scheduling.mlir lifo case: c0 feeds c1 (id 0) and c2 (id 1); c3 (id 2) uses c1.  All in one
// stream; c0's users [c2, c1] are pushed in that order and c1 is popped first, then its user c3.
// CHECK-LABEL: --- Running 'lifo_scheduling'
// MSTD-LABEL: --- Running 'lifo_scheduling'
func.func @lifo_scheduling() -> !tfrt.chain {
  %c0 = tfrt.constant.i32 0
  %c1 = tfrt_test.test_cost %c0 {id = 0 : i64, _tfrt_cost = 1 : i64} : i32
  %c2 = tfrt_test.test_cost %c0 {id = 1 : i64, _tfrt_cost = 1 : i64} : i32
  %c3 = tfrt_test.test_cost %c1 {id = 2 : i64, _tfrt_cost = 1 : i64} : i32
  // CHECK-NEXT: 'lifo_scheduling' returned !tfrt.chain value
  // CHECK-NEXT: id: 0
  // CHECK-NEXT: id: 2
  // CHECK-NEXT: id: 1
  // MSTD: id: 0
  // MSTD: id: 2
  // MSTD: id: 1
  %ch = tfrt.new.chain
  tfrt.return %ch : !tfrt.chain
}

// Users of one value that become ready together run in program order.
// CHECK-LABEL: --- Running 'program_order'
func.func @program_order() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %x = tfrt.constant.i32 7
  %a = tfrt_test.test_cost %x {id = 10 : i64, _tfrt_cost = 1 : i64} : i32
  %b = tfrt_test.test_cost %x {id = 11 : i64, _tfrt_cost = 1 : i64} : i32
  %c = tfrt_test.test_cost %x {id = 12 : i64, _tfrt_cost = 1 : i64} : i32
  // CHECK-NEXT: 'program_order' returned !tfrt.chain value
  // CHECK-NEXT: id: 10
  // CHECK-NEXT: id: 11
  // CHECK-NEXT: id: 12
  tfrt.return %ch0 : !tfrt.chain
}

}
