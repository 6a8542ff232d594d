// Error propagation (docs/executor.md, docs/host.md): one diagnostic at the failing kernel (matched silently by
// expected-error), dependents skipped silently, the last error operand wins, cancellation
// yields Cancelled results without a diagnostic.
// RUN: bef_executor %s.bef 2>&1 | FileCheck %s
// RUN: bef_executor --work_queue_type=mstd:2 %s.bef 2>&1 | FileCheck %s

// CHECK-LABEL: --- Running 'skipped_dependents'
func.func @skipped_dependents() -> (i32, !tfrt.chain) {
  %ch0 = tfrt.new.chain
  // expected-error @+1 {{runtime error: something bad happened}}
  %x = "tfrt_test.fail"() : () -> i32
  %ch1 = tfrt.print.i32 %x, %ch0
  %one = tfrt.constant.i32 1
  %y = tfrt.add.i32 %x, %one
  // Nothing is printed and nothing else is reported.
  // CHECK-NEXT: 'skipped_dependents' returned <<error: something bad happened>>,<<error: something bad happened>>
  tfrt.return %y, %ch1 : i32, !tfrt.chain
}

// CHECK-LABEL: --- Running 'last_error_wins'
func.func @last_error_wins() -> (i32, i32) {
  // expected-error @+1 {{runtime error: something bad happened asynchronously}}
  %a = "tfrt_test.report_error_async"() : () -> i32
  // expected-error @+1 {{runtime error: something bad happened}}
  %b = "tfrt_test.fail"() : () -> i32
  %ab = tfrt.add.i32 %a, %b
  %ba = tfrt.add.i32 %b, %a
  // CHECK-NEXT: 'last_error_wins' returned <<error: something bad happened>>,<<error: something bad happened asynchronously>>
  tfrt.return %ab, %ba : i32, i32
}

// CHECK-LABEL: --- Running 'cancelled'
func.func @cancelled() -> (i32, !tfrt.chain) {
  %ch0 = tfrt.new.chain
  %zero, %ch1 = "tfrt_test.cancel"(%ch0) : (!tfrt.chain) -> (i32, !tfrt.chain)
  %one = tfrt.constant.i32 1
  %x = tfrt.add.i32 %zero, %one
  %ch2 = tfrt.print.i32 %x, %ch1
  // CHECK-NEXT: 'cancelled' returned <<error: Cancelled>>,<<error: Cancelled>>
  tfrt.return %x, %ch2 : i32, !tfrt.chain
}

// CHECK-LABEL: --- Running 'after_cancel'
func.func @after_cancel() -> i32 {
  // A new request per function: the cancellation above does not leak into this one.
  %one = tfrt.constant.i32 1
  %two = tfrt.add.i32 %one, %one
  // CHECK-NEXT: 'after_cancel' returned 2
  tfrt.return %two : i32
}
