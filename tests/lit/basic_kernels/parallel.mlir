// tfrt.parallel_for.i32 / tfrt.parallel_call.i32 with fixed block sizes (docs/executor.md).
// RUN: bef_executor %s.bef | FileCheck %s
// RUN: bef_executor -work_queue_type=mstd:2 %s.bef | FileCheck %s

// CHECK-LABEL: --- Running 'parallel_for_sync_body'
func.func @parallel_for_sync_body() -> (i32, i32) {
  %start = tfrt.constant.i32 0
  %end = tfrt.constant.i32 10
  %block = tfrt.constant.i32 1
  %starts = "tfrt_test.atomic.create.i32"() : () -> !test.atomic.i32
  %ends = "tfrt_test.atomic.create.i32"() : () -> !test.atomic.i32
  %done = tfrt.parallel_for.i32 %start to %end fixed %block, %starts, %ends : !test.atomic.i32, !test.atomic.i32 {
    %ch0 = tfrt.new.chain
    %ch1 = "tfrt_test.atomic.add.i32"(%starts, %start, %ch0) : (!test.atomic.i32, i32, !tfrt.chain) -> !tfrt.chain
    %ch2 = "tfrt_test.atomic.add.i32"(%ends, %end, %ch1) : (!test.atomic.i32, i32, !tfrt.chain) -> !tfrt.chain
    tfrt.return
  }
  %s, %ch1 = "tfrt_test.atomic.get.i32"(%starts, %done) : (!test.atomic.i32, !tfrt.chain) -> (i32, !tfrt.chain)
  %e, %ch2 = "tfrt_test.atomic.get.i32"(%ends, %ch1) : (!test.atomic.i32, !tfrt.chain) -> (i32, !tfrt.chain)
  // Blocks [0,1) .. [9,10): the starts sum to 45 and the ends to 55.
  // CHECK-NEXT: 'parallel_for_sync_body' returned 45,55
  tfrt.return %s, %e : i32, i32
}

// CHECK-LABEL: --- Running 'parallel_for_async_body'
func.func @parallel_for_async_body() -> i32 {
  %start = tfrt.constant.i32 3
  %end = tfrt.constant.i32 20
  %block = tfrt.constant.i32 4
  %total = "tfrt_test.atomic.create.i32"() : () -> !test.atomic.i32
  %done = tfrt.parallel_for.i32 %start to %end fixed %block, %total : !test.atomic.i32 {
    %n = tfrt.minus.i32 %end, %start
    %m = "tfrt_test.async_copy.i32"(%n) : (i32) -> i32
    %ch0 = tfrt.new.chain
    %ch1 = "tfrt_test.atomic.add.i32"(%total, %m, %ch0) : (!test.atomic.i32, i32, !tfrt.chain) -> !tfrt.chain
    tfrt.return %ch1 : !tfrt.chain
  }
  %v, %ch = "tfrt_test.atomic.get.i32"(%total, %done) : (!test.atomic.i32, !tfrt.chain) -> (i32, !tfrt.chain)
  // Every element of [3, 20) counted once.
  // CHECK-NEXT: 'parallel_for_async_body' returned 17
  tfrt.return %v : i32
}

func.func private @count_block(%start: i32, %end: i32, %total: !test.atomic.i32) -> !tfrt.chain {
  %n = tfrt.minus.i32 %end, %start
  %ch0 = tfrt.new.chain
  %ch1 = "tfrt_test.atomic.add.i32"(%total, %n, %ch0) : (!test.atomic.i32, i32, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'parallel_call'
func.func @parallel_call() -> i32 {
  %start = tfrt.constant.i32 0
  %end = tfrt.constant.i32 100
  %block = tfrt.constant.i32 7
  %total = "tfrt_test.atomic.create.i32"() : () -> !test.atomic.i32
  %done = tfrt.parallel_call.i32 %start to %end fixed %block @count_block(%total) : !test.atomic.i32
  %v, %ch = "tfrt_test.atomic.get.i32"(%total, %done) : (!test.atomic.i32, !tfrt.chain) -> (i32, !tfrt.chain)
  // CHECK-NEXT: 'parallel_call' returned 100
  tfrt.return %v : i32
}

// CHECK-LABEL: --- Running 'parallel_for_empty'
func.func @parallel_for_empty() -> !tfrt.chain {
  %start = tfrt.constant.i32 5
  %end = tfrt.constant.i32 5
  %block = tfrt.constant.i32 2
  %done = tfrt.parallel_for.i32 %start to %end fixed %block {
    tfrt.return
  }
  // CHECK-NEXT: 'parallel_for_empty' returned !tfrt.chain value
  tfrt.return %done : !tfrt.chain
}
