// RUN: bef_executor_lite %s.bef | FileCheck %s --dump-input=fail
// RUN: bef_executor_lite -work_queue_type=mstd %s.bef | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_executor/concurrent.mlir: 1024 asynchronous
// increments of an atomic counter (nested repeat + do.async) and blocking sleeps. The CHECK lines
// hold for both the single-threaded and the multi-threaded queue.

// CHECK-LABEL: --- Not running 'inc_async' because it has arguments
func.func @inc_async(%counter: !test.atomic.i32, %ch0: !tfrt.chain) -> !tfrt.chain {
  %ch1 = tfrt_test.do.async %counter, %ch0 : (!test.atomic.i32, !tfrt.chain) -> (!tfrt.chain) {
    %ch2 = "tfrt_test.atomic.inc.i32"(%counter, %ch0) : (!test.atomic.i32, !tfrt.chain) -> !tfrt.chain
    tfrt.return %ch2 : !tfrt.chain
  }
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'concurrent_increments'
// The print's chain is returned too: the driver prints the results only once all are
// available, so under mstd the print (run by a worker) cannot come after the `returned` line.
func.func @concurrent_increments() -> (i32, !tfrt.chain) {
  %ch0 = tfrt.new.chain
  %counter = "tfrt_test.atomic.create.i32"() : () -> !test.atomic.i32
  %n = tfrt.constant.i32 32

  %ch3, %c3 = tfrt.repeat.i32 %n, %ch0, %counter : !tfrt.chain, !test.atomic.i32 {
    %m = tfrt.constant.i32 32
    %ch4, %c4 = tfrt.repeat.i32 %m, %ch0, %counter : !tfrt.chain, !test.atomic.i32 {
      %ch5 = tfrt.call @inc_async(%counter, %ch0) : (!test.atomic.i32, !tfrt.chain) -> !tfrt.chain
      %ch6 = tfrt.merge.chains %ch0, %ch5 : !tfrt.chain, !tfrt.chain
      tfrt.return %ch6, %counter : !tfrt.chain, !test.atomic.i32
    }
    tfrt.return %ch4, %c4 : !tfrt.chain, !test.atomic.i32
  }

  %v, %ch7 = "tfrt_test.atomic.get.i32"(%counter, %ch3) : (!test.atomic.i32, !tfrt.chain) -> (i32, !tfrt.chain)
  // CHECK: int32 = 1024
  %ch8 = tfrt.print.i32 %v, %ch7
  // CHECK-NEXT: 'concurrent_increments' returned 1024,!tfrt.chain value
  tfrt.return %v, %ch8 : i32, !tfrt.chain
}

// CHECK-LABEL: --- Running 'parallel_increments'
func.func @parallel_increments() -> i32 {
  %ch0 = tfrt.new.chain
  %counter = "tfrt_test.atomic.create.i32"() : () -> !test.atomic.i32
  %ch1 = tfrt.call @inc_async(%counter, %ch0) : (!test.atomic.i32, !tfrt.chain) -> !tfrt.chain
  %ch2 = tfrt.call @inc_async(%counter, %ch0) : (!test.atomic.i32, !tfrt.chain) -> !tfrt.chain
  %ch3 = tfrt.call @inc_async(%counter, %ch0) : (!test.atomic.i32, !tfrt.chain) -> !tfrt.chain
  %ch4 = tfrt.merge.chains %ch1, %ch2, %ch3 : !tfrt.chain, !tfrt.chain, !tfrt.chain
  %v, %ch5 = "tfrt_test.atomic.get.i32"(%counter, %ch4) : (!test.atomic.i32, !tfrt.chain) -> (i32, !tfrt.chain)
  // CHECK-NEXT: 'parallel_increments' returned 3
  tfrt.return %v : i32
}

// CHECK-LABEL: --- Running 'usleep'
func.func @usleep() {
  %t = tfrt.constant.i32 1000
  // CHECK: Slept for 1000 microseconds
  "tfrt_test.usleep"(%t) : (i32) -> ()
  tfrt.return
}

// CHECK-LABEL: --- Running 'blocking_usleep'
func.func @blocking_usleep() -> !tfrt.chain {
  %t = tfrt.constant.i32 1000
  // CHECK-NEXT: Slept for 1000 microseconds
  %ch = "tfrt_test.blocking.usleep"(%t) : (i32) -> (!tfrt.chain)
  // CHECK-NEXT: 'blocking_usleep' returned !tfrt.chain value
  tfrt.return %ch : !tfrt.chain
}

// CHECK-LABEL: --- Running 'two_blocking_usleeps'
func.func @two_blocking_usleeps() -> (!tfrt.chain, !tfrt.chain) {
  %t1 = tfrt.constant.i32 1000
  %t2 = tfrt.constant.i32 2000
  // CHECK-DAG: Slept for 1000 microseconds
  // CHECK-DAG: Slept for 2000 microseconds
  %ch1 = "tfrt_test.blocking.usleep"(%t1) : (i32) -> (!tfrt.chain)
  %ch2 = "tfrt_test.blocking.usleep"(%t2) : (i32) -> (!tfrt.chain)
  // CHECK: 'two_blocking_usleeps' returned !tfrt.chain value,!tfrt.chain value
  tfrt.return %ch1, %ch2 : !tfrt.chain, !tfrt.chain
}
