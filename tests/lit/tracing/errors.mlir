// Error and cancellation markers: a failing kernel adds `Event:error: <kernel>`; kernels
// that only forward the error (or the cancellation) without running add
// `Event:skipped: <kernel>` / `Event:cancelled: <kernel>`.
// RUN: bef_executor --enable_tracing --tracing_level=debug %s.bef 2>/dev/null | FileCheck %s

// CHECK-LABEL: --- Running 'failing'
// CHECK-NEXT: 'failing' returned <<error: something bad happened>>
func.func @failing() -> i32 {
  // expected-error @+1 {{runtime error: something bad happened}}
  %x = "tfrt_test.fail"() : () -> i32
  %y = tfrt.add.i32 %x, %x
  tfrt.return %y : i32
}

// CHECK-LABEL: --- Running 'cancelled'
// CHECK-NEXT: 'cancelled' returned <<error: Cancelled>>
func.func @cancelled() -> i32 {
  %ch0 = tfrt.new.chain
  %zero, %ch1 = "tfrt_test.cancel"(%ch0) : (!tfrt.chain) -> (i32, !tfrt.chain)
  %one = tfrt.constant.i32 1
  %x = tfrt.add.i32 %zero, %one
  tfrt.return %x : i32
}

// CHECK: Scope:Function: failing
// CHECK-NEXT: Scope:BEFExecutor::ProcessReadyKernels
// CHECK-NEXT: Scope:tfrt_test.fail
// CHECK-NEXT: Event:error: tfrt_test.fail
// CHECK-NEXT: End Scope
// CHECK-NEXT: Event:skipped: tfrt.add.i32
// CHECK-NEXT: End Scope
// CHECK-NEXT: End Scope
// CHECK: Scope:Function: cancelled
// CHECK: Scope:tfrt_test.cancel
// CHECK-NEXT: End Scope
// CHECK: Event:cancelled: tfrt.add.i32
