// Invalid arguments of nqueens.i32 are diagnostics at the op (matched, hence silent) and
// error results.
// RUN: bef_executor %s.bef | FileCheck %s
// RUN: bef_executor --work_queue_type=mstd:2 %s.bef | FileCheck %s

// CHECK-LABEL: --- Running 'n_zero'
func.func @n_zero() -> i32 {
  %n = tfrt.constant.i32 0
  %levels = tfrt.constant.i32 0
  // expected-error @+1 {{runtime error: nqueens: n must be at least 1, got 0}}
  %count = "nqueens.i32"(%n, %levels) : (i32, i32) -> i32
  tfrt.return %count : i32
}
// CHECK: 'n_zero' returned <<error: nqueens: n must be at least 1, got 0>>

// CHECK-LABEL: --- Running 'negative_levels'
func.func @negative_levels() -> i32 {
  %n = tfrt.constant.i32 8
  %levels = tfrt.constant.i32 -1
  // expected-error @+1 {{runtime error: nqueens: levels must not be negative, got -1}}
  %count = "nqueens.i32"(%n, %levels) : (i32, i32) -> i32
  tfrt.return %count : i32
}
// CHECK: 'negative_levels' returned <<error: nqueens: levels must not be negative, got -1>>

// CHECK-LABEL: --- Running 'levels_above_n'
func.func @levels_above_n() -> i32 {
  %n = tfrt.constant.i32 4
  %levels = tfrt.constant.i32 5
  // expected-error @+1 {{runtime error: nqueens: levels (5) must not exceed n (4)}}
  %count = "nqueens.python.i32"(%n, %levels) : (i32, i32) -> i32
  tfrt.return %count : i32
}
// CHECK: 'levels_above_n' returned <<error: nqueens: levels (5) must not exceed n (4)>>

// The print after a failed count is skipped (its operand is an error); nothing is printed.
// CHECK-LABEL: --- Running 'print_skipped'
// CHECK-NOT: int32
func.func @print_skipped() {
  %ch0 = tfrt.new.chain
  %n = tfrt.constant.i32 19
  %levels = tfrt.constant.i32 2
  // expected-error @+1 {{runtime error: nqueens: n must be at most 18 (the i32 count overflows), got 19}}
  %count = "nqueens.i32"(%n, %levels) : (i32, i32) -> i32
  %ch1 = tfrt.print.i32 %count, %ch0
  tfrt.return
}
