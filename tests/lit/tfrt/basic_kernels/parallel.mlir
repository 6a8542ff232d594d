// RUN: bef_executor %s.bef | FileCheck %s --dump-input=fail
// RUN: bef_executor -work_queue_type=mstd %s.bef | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/basic_kernels/parallel.mlir: parallel_for
// and parallel_call with a fixed block size, accumulating block starts and ends atomically
// (range 0..10, block 1: the starts sum to 45, the ends to 55).

// CHECK-LABEL: --- Running 'parallel_for'
func.func @parallel_for() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %start = tfrt.constant.i32 0
  %end = tfrt.constant.i32 10
  %block_size = tfrt.constant.i32 1

  %cnt0 = "tfrt_test.atomic.create.i32"() : () -> !test.atomic.i32
  %cnt1 = "tfrt_test.atomic.create.i32"() : () -> !test.atomic.i32

  %done = tfrt.parallel_for.i32 %start to %end fixed %block_size, %cnt0, %cnt1 : !test.atomic.i32, !test.atomic.i32 {
    %ch = tfrt.new.chain
    %ch1 = "tfrt_test.atomic.add.i32"(%cnt0, %start, %ch) : (!test.atomic.i32, i32, !tfrt.chain) -> !tfrt.chain
    %ch2 = "tfrt_test.atomic.add.i32"(%cnt1, %end, %ch1) : (!test.atomic.i32, i32, !tfrt.chain) -> !tfrt.chain
    tfrt.return %ch2 : !tfrt.chain
  }

  %v0, %ch1 = "tfrt_test.atomic.get.i32"(%cnt0, %done) : (!test.atomic.i32, !tfrt.chain) -> (i32, !tfrt.chain)
  %v1, %ch2 = "tfrt_test.atomic.get.i32"(%cnt1, %ch1) : (!test.atomic.i32, !tfrt.chain) -> (i32, !tfrt.chain)

  // CHECK-NEXT: int32 = 45
  %ch3 = tfrt.print.i32 %v0, %ch2
  // CHECK-NEXT: int32 = 55
  %ch4 = tfrt.print.i32 %v1, %ch3

  tfrt.return %ch4 : !tfrt.chain
}

// CHECK-LABEL: --- Not running 'accumulate' because it has arguments
func.func @accumulate(%start: i32, %end: i32, %cnt: !test.atomic.i32) -> !tfrt.chain {
  %ch = tfrt.new.chain
  %ch1 = "tfrt_test.atomic.add.i32"(%cnt, %start, %ch) : (!test.atomic.i32, i32, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'parallel_call'
func.func @parallel_call() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %start = tfrt.constant.i32 0
  %end = tfrt.constant.i32 10
  %block_size = tfrt.constant.i32 1

  %cnt = "tfrt_test.atomic.create.i32"() : () -> !test.atomic.i32
  %done = tfrt.parallel_call.i32 %start to %end fixed %block_size @accumulate(%cnt) : !test.atomic.i32

  %v, %ch1 = "tfrt_test.atomic.get.i32"(%cnt, %done) : (!test.atomic.i32, !tfrt.chain) -> (i32, !tfrt.chain)
  // CHECK-NEXT: int32 = 45
  %ch2 = tfrt.print.i32 %v, %ch1
  tfrt.return %ch2 : !tfrt.chain
}
