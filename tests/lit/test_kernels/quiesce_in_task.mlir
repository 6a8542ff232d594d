// `tfrt_test.quiesce` run by a kernel that itself runs inside a task (a `tfrt_test.do.async`
// body): on the single-threaded queue, as TFRT's single-threaded Quiesce does, the tasks queued
// meanwhile run inline, on the spot -- the sleep the body queues prints before the print that
// waits for the quiesce.  The multi-threaded queue refuses to quiesce from a worker thread (it
// would wait for itself): a diagnostic at the kernel.  The body is a task on both queues
// whatever the timing (kernels waiting on an asynchronous value could run inline on the
// calling thread if the value came first).
// RUN: bef_executor %s.bef | FileCheck %s --check-prefix=S --dump-input=fail
// RUN: not bef_executor -work_queue_type=mstd:1 %s.bef 2>&1 | FileCheck %s --check-prefix=MSTD --dump-input=fail

// S-LABEL: --- Running 'quiesce_in_a_task'
// S-NEXT: int32 = 2
// S-NEXT: Slept for 2 microseconds
// S-NEXT: int32 = 1
// S-NOT: error
// MSTD: error: unexpected error: runtime error: quiesce() called from a worker thread (would deadlock)
func.func @quiesce_in_a_task() {
  %ch0 = tfrt.new.chain
  %one = tfrt.constant.i32 1
  %two = tfrt.constant.i32 2
  %done = tfrt_test.do.async %one, %two, %ch0 : (i32, i32, !tfrt.chain) -> (!tfrt.chain) {
    "tfrt_test.usleep"(%two) : (i32) -> ()
    %ch1 = tfrt.print.i32 %two, %ch0
    %ch2 = "tfrt_test.quiesce"(%ch1) : (!tfrt.chain) -> !tfrt.chain
    %ch3 = tfrt.print.i32 %one, %ch2
    tfrt.return %ch3 : !tfrt.chain
  }
  tfrt.return
}
