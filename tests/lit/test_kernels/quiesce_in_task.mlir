// `tfrt_test.quiesce` run by a kernel that itself runs inside a task of the single-threaded
// queue: as TFRT's single-threaded Quiesce does, the tasks queued meanwhile run inline, on the
// spot.  Here the kernels after the async add run in its task; the sleep they queue prints
// before the print that waits for the quiesce.  The multi-threaded queue refuses to quiesce
// from a worker thread (it would wait for itself): a diagnostic at the kernel.
// RUN: bef_executor %s.bef | FileCheck %s --check-prefix=S --dump-input=fail
// RUN: not bef_executor -work_queue_type=mstd:1 %s.bef 2>&1 | FileCheck %s --check-prefix=MSTD

// S-LABEL: --- Running 'quiesce_in_a_task'
// S-NEXT: int32 = 2
// S-NEXT: Slept for 2 microseconds
// S-NEXT: int32 = 1
// S-NOT: error
// MSTD: error: unexpected error: runtime error: quiesce() called from a worker thread (would deadlock)
func.func @quiesce_in_a_task() {
  %ch0 = tfrt.new.chain
  %one = tfrt.constant.i32 1
  %x = "tfrt_test.async_add.i32"(%one, %one) : (i32, i32) -> i32
  "tfrt_test.usleep"(%x) : (i32) -> ()
  %ch1 = tfrt.print.i32 %x, %ch0
  %ch2 = "tfrt_test.quiesce"(%ch1) : (!tfrt.chain) -> !tfrt.chain
  %ch3 = tfrt.print.i32 %one, %ch2
  tfrt.return
}
