// Error-producing test kernels: emitted diagnostics (matched silently by expected-error),
// error results, asynchronous errors and cancellation (docs/host.md, docs/conformance.md).
// RUN: bef_executor %s.bef 2>&1 | FileCheck %s

// CHECK-LABEL: --- Running 'fail'
func.func @fail() -> i32 {
  // expected-error @+1 {{runtime error: something bad happened}}
  %x = "tfrt_test.fail"() : () -> i32
  // CHECK-NEXT: 'fail' returned <<error: something bad happened>>
  tfrt.return %x : i32
}

// CHECK-LABEL: --- Running 'error_propagates'
func.func @error_propagates() -> i32 {
  // expected-error @+1 {{runtime error: something bad happened}}
  %x = "tfrt_test.fail"() : () -> i32
  %one = tfrt.constant.i32 1
  %y = tfrt.add.i32 %x, %one
  // The add is skipped silently and inherits the error.
  // CHECK-NEXT: 'error_propagates' returned <<error: something bad happened>>
  tfrt.return %y : i32
}

// CHECK-LABEL: --- Running 'ignored_error'
func.func @ignored_error() -> i32 {
  // expected-error @+1 {{runtime error: something bad happened}}
  %x = "tfrt_test.fail"() : () -> i32
  %one = tfrt.constant.i32 1
  // CHECK-NEXT: 'ignored_error' returned 1
  tfrt.return %one : i32
}

// CHECK-LABEL: --- Running 'partial_fail'
func.func @partial_fail() -> (i32, i32) {
  // expected-error @+1 {{runtime error: something bad happened}}
  %x, %y = "tfrt_test.partial_fail"() : () -> (i32, i32)
  // CHECK-NEXT: 'partial_fail' returned 1,<<error: something bad happened>>
  tfrt.return %x, %y : i32, i32
}

// CHECK-LABEL: --- Running 'report_error_async'
func.func @report_error_async() -> i32 {
  // expected-error @+1 {{runtime error: something bad happened asynchronously}}
  %x = "tfrt_test.report_error_async"() : () -> i32
  // CHECK-NEXT: 'report_error_async' returned <<error: something bad happened asynchronously>>
  tfrt.return %x : i32
}

// CHECK-LABEL: --- Running 'report_error_concrete_async'
func.func @report_error_concrete_async() -> (i32, i32) {
  %zero = tfrt.constant.i32 0
  %one = tfrt.constant.i32 1
  %a = "tfrt_test.report_error_concrete_async"(%zero) : (i32) -> i32
  // expected-error @+1 {{runtime error: something bad happened asynchronously}}
  %b = "tfrt_test.report_error_concrete_async"(%one) : (i32) -> i32
  // CHECK-NEXT: 'report_error_concrete_async' returned 0,<<error: something bad happened asynchronously>>
  tfrt.return %a, %b : i32, i32
}

// CHECK-LABEL: --- Running 'report_error_indirect_async'
func.func @report_error_indirect_async() -> (i32, i32) {
  %zero = tfrt.constant.i32 0
  %one = tfrt.constant.i32 1
  %a = "tfrt_test.report_error_indirect_async"(%zero) : (i32) -> i32
  // expected-error @+1 {{runtime error: something bad happened asynchronously}}
  %b = "tfrt_test.report_error_indirect_async"(%one) : (i32) -> i32
  // CHECK-NEXT: 'report_error_indirect_async' returned 0,<<error: something bad happened asynchronously>>
  tfrt.return %a, %b : i32, i32
}

// CHECK-LABEL: --- Running 'error_chain'
func.func @error_chain() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  // expected-error @+1 {{runtime error: error chain}}
  %ch1 = "tfrt_test.error_chain"(%ch0) : (!tfrt.chain) -> !tfrt.chain
  %x = tfrt.constant.i32 3
  // The print is skipped: its chain operand is an error.
  // CHECK-NOT: int32 = 3
  %ch2 = tfrt.print.i32 %x, %ch1
  // CHECK: 'error_chain' returned <<error: error chain>>
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'cancel'
func.func @cancel() -> (i32, i32) {
  %ch0 = tfrt.new.chain
  %x, %ch1 = "tfrt_test.cancel"(%ch0) : (!tfrt.chain) -> (i32, !tfrt.chain)
  %one = tfrt.constant.i32 1
  %y = tfrt.add.i32 %x, %one
  // Every kernel that starts after the cancellation resolves to Cancelled, silently.
  // CHECK-NOT: int32
  %ch2 = tfrt.print.i32 %y, %ch1
  // CHECK: 'cancel' returned 0,<<error: Cancelled>>
  tfrt.return %x, %y : i32, i32
}
