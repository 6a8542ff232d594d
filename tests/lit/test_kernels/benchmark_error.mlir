// RUN: bef_executor %s.bef 2>&1 | FileCheck %s

// A benchmark whose body fails stops at the first failed run: the error is reported once
// (not once per run), then the benchmark's own diagnostic, then the report of the runs made.

// CHECK-LABEL: --- Running 'failing_body':
// CHECK-NEXT: BM:div_by_zero:Duration(ns):
// CHECK-NEXT: BM:div_by_zero:Count: 0
// CHECK-NOT: error
func.func @failing_body() {
  %zero = tfrt.constant.i32 0
  // expected-error @+1 {{benchmark 'div_by_zero' stopped after run 1: the benchmarked function failed}}
  tfrt_test.benchmark "div_by_zero"(%zero : i32) duration_secs = 5, max_count = 1000, num_warmup_runs = 2 {
    // expected-error @+1 {{Divide by zero}}
    %q, %r = tfrt.div.i32 %zero, %zero
    tfrt.return %q : i32
  }
  tfrt.return
}
