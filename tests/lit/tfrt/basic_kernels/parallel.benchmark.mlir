// RUN: bef_executor --work_queue_type=mstd:8 %s.bef | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/basic_kernels/parallel.benchmark.mlir: parallel_for
// with synchronous and asynchronous region bodies and parallel_call into the native functions
// native_sink / native_async_sink, each inside a benchmark; only the `--- Running` labels are
// checked.
// Deviation (keeps the suite fast): TFRT runs each benchmark for `duration_secs = 3,
// max_count = 1000000` over the range 0..1000 with block size 1; here `max_count = 2` and the
// range is 0..64, which exercises the same kernels in a fraction of a second.

func.func private @native_sink(%start: i32, %end: i32) attributes {tfrt.native}
func.func private @native_async_sink(%start: i32, %end: i32) -> !tfrt.chain attributes {tfrt.native}

// CHECK-LABEL: --- Running 'BM_parallel_for_sync'
func.func @BM_parallel_for_sync() {
  %start = tfrt.constant.i32 0
  %end = tfrt.constant.i32 64
  %block_size = tfrt.constant.i32 1

  tfrt_test.benchmark "BM_parallel_for_sync"(%start : i32, %end : i32, %block_size : i32) duration_secs = 3, max_count = 2, num_warmup_runs = 1 {
    %done = tfrt.parallel_for.i32 %start to %end fixed %block_size {
      tfrt.return
    }
    tfrt.return %done : !tfrt.chain
  }
  tfrt.return
}

// CHECK-LABEL: --- Running 'BM_parallel_for_async'
func.func @BM_parallel_for_async() {
  %start = tfrt.constant.i32 0
  %end = tfrt.constant.i32 64
  %block_size = tfrt.constant.i32 1

  tfrt_test.benchmark "BM_parallel_for_async"(%start : i32, %end : i32, %block_size : i32) duration_secs = 3, max_count = 2, num_warmup_runs = 1 {
    %done = tfrt.parallel_for.i32 %start to %end fixed %block_size {
      %ch = tfrt.new.chain
      tfrt.return %ch : !tfrt.chain
    }
    tfrt.return %done : !tfrt.chain
  }
  tfrt.return
}

// CHECK-LABEL: --- Running 'BM_parallel_call_sync'
func.func @BM_parallel_call_sync() {
  %start = tfrt.constant.i32 0
  %end = tfrt.constant.i32 64
  %block_size = tfrt.constant.i32 1

  tfrt_test.benchmark "BM_parallel_call_sync"(%start : i32, %end : i32, %block_size : i32) duration_secs = 3, max_count = 2, num_warmup_runs = 1 {
    %done = tfrt.parallel_call.i32 %start to %end fixed %block_size @native_sink()
    tfrt.return %done : !tfrt.chain
  }
  tfrt.return
}

// CHECK-LABEL: --- Running 'BM_parallel_call_async'
func.func @BM_parallel_call_async() {
  %start = tfrt.constant.i32 0
  %end = tfrt.constant.i32 64
  %block_size = tfrt.constant.i32 1

  tfrt_test.benchmark "BM_parallel_call_async"(%start : i32, %end : i32, %block_size : i32) duration_secs = 3, max_count = 2, num_warmup_runs = 1 {
    %done = tfrt.parallel_call.i32 %start to %end fixed %block_size @native_async_sink()
    tfrt.return %done : !tfrt.chain
  }
  tfrt.return
}
