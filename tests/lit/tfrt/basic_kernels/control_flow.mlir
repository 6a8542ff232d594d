// RUN: bef_executor %s.bef | FileCheck %s --dump-input=fail
// RUN: bef_executor -work_queue_type=mstd %s.bef | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/basic_kernels/control_flow.mlir: tfrt.if
// (regions, no-result form), repeat 2/5/large/cancel, indirect async return, cond, case, inline
// and parallel while (+ error body), once, merge.chains returning a chain. The CHECK lines hold
// for both work queues.

// CHECK-LABEL: --- Running 'if_test_0'
func.func @if_test_0() {
  %ch0 = tfrt.new.chain
  %a = tfrt.constant.i32 45
  %b = tfrt.constant.i32 129
  %true = tfrt.constant.i1 1

  %x, %y = tfrt.if %true, %a, %b : (i32, i32) -> (i32, i32) {
    tfrt.return %a, %b : i32, i32
  } else {
    tfrt.return %b, %a : i32, i32
  }

  // CHECK-NEXT: int32 = 45
  %ch1 = tfrt.print.i32 %x, %ch0
  // CHECK-NEXT: int32 = 129
  %ch2 = tfrt.print.i32 %y, %ch1
  tfrt.return
}

// CHECK-LABEL: --- Running 'if_test_1'
func.func @if_test_1() {
  %ch0 = tfrt.new.chain
  %a = tfrt.constant.i32 45
  %b = tfrt.constant.i32 129
  %false = tfrt.constant.i1 0

  %x, %y = tfrt.if %false, %a, %b : (i32, i32) -> (i32, i32) {
    tfrt.return %a, %b : i32, i32
  } else {
    tfrt.return %b, %a : i32, i32
  }

  // CHECK-NEXT: int32 = 129
  %ch1 = tfrt.print.i32 %x, %ch0
  // CHECK-NEXT: int32 = 45
  %ch2 = tfrt.print.i32 %y, %ch1
  tfrt.return
}

// CHECK-LABEL: --- Running 'if_test_2'
func.func @if_test_2() {
  %ch0 = tfrt.new.chain
  %true = tfrt.constant.i1 1
  // An if without results needs no else region.
  // CHECK-NEXT: hello host executor!
  tfrt.if %true, %ch0 : (!tfrt.chain) -> () {
    %ch1 = "tfrt_test.print_hello"(%ch0) : (!tfrt.chain) -> !tfrt.chain
    tfrt.return
  }
  tfrt.return
}

// CHECK-LABEL: --- Running 'repeat2'
func.func @repeat2() {
  %count = tfrt.constant.i32 2
  %ch0 = tfrt.new.chain
  %v0 = tfrt.constant.i32 42

  %ch3, %v3 = tfrt.repeat.i32 %count, %ch0, %v0 : !tfrt.chain, i32 {
    %ch1 = tfrt.print.i32 %v0, %ch0
    %one = tfrt.constant.i32 1
    %v2 = tfrt.add.i32 %v0, %one
    tfrt.return %ch1, %v2 : !tfrt.chain, i32
  }

  // CHECK-NEXT: int32 = 42
  // CHECK-NEXT: int32 = 43
  // CHECK-NEXT: int32 = 44
  %ch4 = tfrt.print.i32 %v3, %ch3
  tfrt.return
}

// CHECK-LABEL: --- Running 'repeat5'
func.func @repeat5() {
  %count = tfrt.constant.i32 5
  %ch0 = tfrt.new.chain
  %v0 = tfrt.constant.i32 0

  %ch3, %v3 = tfrt.repeat.i32 %count, %ch0, %v0 : !tfrt.chain, i32 {
    %ch1 = tfrt.print.i32 %v0, %ch0
    %one = tfrt.constant.i32 1
    %v2 = tfrt.add.i32 %v0, %one
    tfrt.return %ch1, %v2 : !tfrt.chain, i32
  }

  // CHECK-NEXT: int32 = 0
  // CHECK-NEXT: int32 = 1
  // CHECK-NEXT: int32 = 2
  // CHECK-NEXT: int32 = 3
  // CHECK-NEXT: int32 = 4
  // CHECK-NEXT: int32 = 5
  %ch4 = tfrt.print.i32 %v3, %ch3
  tfrt.return
}

// Large enough to need several blocks of 32 iterations.
// CHECK-LABEL: --- Running 'repeat_large'
func.func @repeat_large() {
  %count = tfrt.constant.i32 1000
  %ch0 = tfrt.new.chain
  %v0 = tfrt.constant.i32 0

  %ch3, %v3 = tfrt.repeat.i32 %count, %ch0, %v0 : !tfrt.chain, i32 {
    %one = tfrt.constant.i32 1
    %v2 = tfrt.add.i32 %v0, %one
    tfrt.return %ch0, %v2 : !tfrt.chain, i32
  }

  // CHECK-NEXT: int32 = 1000
  %ch4 = tfrt.print.i32 %v3, %ch3
  tfrt.return
}

// CHECK-LABEL: --- Running 'repeat_cancel'
func.func @repeat_cancel() -> i32 {
  %count = tfrt.constant.i32 5
  %ch0 = tfrt.new.chain
  %v0 = tfrt.constant.i32 0

  %ch3, %v3 = tfrt.repeat.i32 %count, %ch0, %v0 : !tfrt.chain, i32 {
    %ch1 = tfrt.print.i32 %v0, %ch0
    %x, %ch2 = "tfrt_test.cancel"(%ch1) : (!tfrt.chain) -> (i32, !tfrt.chain)
    %one = tfrt.constant.i32 1
    %v2 = tfrt.add.i32 %v0, %one
    tfrt.return %ch2, %v2 : !tfrt.chain, i32
  }

  // CHECK-NEXT: int32 = 0
  // CHECK-NEXT: 'repeat_cancel' returned <<error: Cancelled>>
  tfrt.return %v3 : i32
}

// CHECK-LABEL: --- Not running 'return_async' because it has arguments
func.func @return_async(%x: i32) -> i32 {
  %one = tfrt.constant.i32 1
  %y = "tfrt_test.async_add.i32"(%x, %one) : (i32, i32) -> i32
  tfrt.return %y : i32
}

// CHECK-LABEL: --- Running 'indirect_async_return'
func.func @indirect_async_return() -> i32 {
  %ch0 = tfrt.new.chain
  %x = tfrt.constant.i32 41
  %y = tfrt.call @return_async(%x) : (i32) -> i32
  // CHECK-NEXT: int32 = 42
  %ch1 = tfrt.print.i32 %y, %ch0
  // CHECK-NEXT: 'indirect_async_return' returned 42
  tfrt.return %y : i32
}

// CHECK-LABEL: --- Not running 'a_true_fn' because it has arguments
func.func @a_true_fn(%x: i32) -> i32 {
  %ch0 = tfrt.new.chain
  %s = tfrt.add.i32 %x, %x
  tfrt.return %s : i32
}

// CHECK-LABEL: --- Not running 'b_false_fn' because it has arguments
func.func @b_false_fn(%x: i32) -> i32 {
  %s = tfrt.minus.i32 %x, %x
  tfrt.return %s : i32
}

// CHECK-LABEL: --- Running 'cond_true'
func.func @cond_true() -> i32 {
  %true = tfrt.constant.i1 1
  %a = tfrt.constant.i32 21
  %r = tfrt.cond %true @a_true_fn @b_false_fn (%a) : (i32) -> (i32)
  // CHECK-NEXT: 'cond_true' returned 42
  tfrt.return %r : i32
}

// CHECK-LABEL: --- Running 'cond_false'
func.func @cond_false() -> i32 {
  %false = tfrt.constant.i1 0
  %a = tfrt.constant.i32 21
  %r = tfrt.cond %false @a_true_fn @b_false_fn (%a) : (i32) -> (i32)
  // CHECK-NEXT: 'cond_false' returned 0
  tfrt.return %r : i32
}

// CHECK-LABEL: --- Not running 'branch0' because it has arguments
func.func @branch0(%ch: !tfrt.chain, %x: i32) -> (!tfrt.chain, i32) {
  %ch1 = tfrt.print.i32 %x, %ch
  tfrt.return %ch1, %x : !tfrt.chain, i32
}

// CHECK-LABEL: --- Not running 'branch1' because it has arguments
func.func @branch1(%ch: !tfrt.chain, %x: i32) -> (!tfrt.chain, i32) {
  %y = tfrt.add.i32 %x, %x
  %ch1 = tfrt.print.i32 %y, %ch
  tfrt.return %ch1, %y : !tfrt.chain, i32
}

// CHECK-LABEL: --- Running 'case_test'
func.func @case_test() -> (i32, i32, i32) {
  %ch0 = tfrt.new.chain
  %a = tfrt.constant.i32 7
  %i0 = tfrt.constant.i32 0
  %i1 = tfrt.constant.i32 1
  %i9 = tfrt.constant.i32 9
  // CHECK-NEXT: int32 = 7
  %ch1, %r0 = tfrt.case %i0 [@branch0, @branch1] (%ch0, %a) : (!tfrt.chain, i32) -> (!tfrt.chain, i32)
  // CHECK-NEXT: int32 = 14
  %ch2, %r1 = tfrt.case %i1 [@branch0, @branch1] (%ch1, %a) : (!tfrt.chain, i32) -> (!tfrt.chain, i32)
  // An out-of-range index selects the last branch.
  // CHECK-NEXT: int32 = 14
  %ch3, %r2 = tfrt.case %i9 [@branch0, @branch1] (%ch2, %a) : (!tfrt.chain, i32) -> (!tfrt.chain, i32)
  // CHECK-NEXT: 'case_test' returned 7,14,14
  tfrt.return %r0, %r1, %r2 : i32, i32, i32
}

// CHECK-LABEL: --- Not running 'while_body' because it has arguments
func.func @while_body(%ch: !tfrt.chain, %i: i32, %x: i32) -> (!tfrt.chain, i32, i32, i1) {
  %ch1 = tfrt.print.i32 %i, %ch
  %one = tfrt.constant.i32 1
  %i1 = tfrt.add.i32 %i, %one
  %x1 = tfrt.add.i32 %x, %i
  %three = tfrt.constant.i32 3
  %cond = "tfrt.lessequal.i32"(%i1, %three) : (i32, i32) -> (i1)
  tfrt.return %ch1, %i1, %x1, %cond : !tfrt.chain, i32, i32, i1
}

// CHECK-LABEL: --- Running 'while_inline'
func.func @while_inline() -> (i32, i32) {
  %ch0 = tfrt.new.chain
  %i = tfrt.constant.i32 0
  %x = tfrt.constant.i32 100
  %true = tfrt.constant.i1 1
  %r:3 = tfrt.while %true @while_body(%ch0, %i, %x) parallel_iterations(1) : (!tfrt.chain, i32, i32) -> (!tfrt.chain, i32, i32)
  // CHECK-NEXT: int32 = 0
  // CHECK-NEXT: int32 = 1
  // CHECK-NEXT: int32 = 2
  // CHECK-NEXT: int32 = 3
  // CHECK-NEXT: 'while_inline' returned 4,106
  tfrt.return %r#1, %r#2 : i32, i32
}

// CHECK-LABEL: --- Running 'while_parallel'
func.func @while_parallel() -> (i32, i32) {
  %ch0 = tfrt.new.chain
  %i = tfrt.constant.i32 0
  %x = tfrt.constant.i32 100
  %true = tfrt.constant.i1 1
  %r:3 = tfrt.while %true @while_body(%ch0, %i, %x) parallel_iterations(4) : (!tfrt.chain, i32, i32) -> (!tfrt.chain, i32, i32)
  // CHECK-NEXT: int32 = 0
  // CHECK-NEXT: int32 = 1
  // CHECK-NEXT: int32 = 2
  // CHECK-NEXT: int32 = 3
  // CHECK-NEXT: 'while_parallel' returned 4,106
  tfrt.return %r#1, %r#2 : i32, i32
}

// CHECK-LABEL: --- Not running 'while_body_cancel' because it has arguments
func.func @while_body_cancel(%ch: !tfrt.chain, %i: i32) -> (!tfrt.chain, i32, i1) {
  %x, %ch1 = "tfrt_test.cancel"(%ch) : (!tfrt.chain) -> (i32, !tfrt.chain)
  %one = tfrt.constant.i32 1
  %i1 = tfrt.add.i32 %i, %one
  %cond = "tfrt.lessequal.i32"(%i1, %x) : (i32, i32) -> (i1)
  tfrt.return %ch1, %i1, %cond : !tfrt.chain, i32, i1
}

// An error in the body's condition ends the loop with that error in every result.
// CHECK-LABEL: --- Running 'while_error_body'
func.func @while_error_body() -> (!tfrt.chain, i32) {
  %ch0 = tfrt.new.chain
  %i = tfrt.constant.i32 0
  %true = tfrt.constant.i1 1
  %r:2 = tfrt.while %true @while_body_cancel(%ch0, %i) parallel_iterations(1) : (!tfrt.chain, i32) -> (!tfrt.chain, i32)
  // CHECK-NEXT: 'while_error_body' returned <<error: Cancelled>>,<<error: Cancelled>>
  tfrt.return %r#0, %r#1 : !tfrt.chain, i32
}

// CHECK-LABEL: --- Not running 'print_once' because it has arguments
func.func @print_once(%x: i32) -> i32 {
  %ch0 = tfrt.new.chain
  %ch1 = tfrt.print.i32 %x, %ch0
  %y = tfrt.add.i32 %x, %x
  %z = "tfrt_test.as_chain"(%y, %ch1) : (i32, !tfrt.chain) -> !tfrt.chain
  %w = "tfrt_test.identity"(%z, %y) : (!tfrt.chain, i32) -> (i32)
  tfrt.return %w : i32
}

// CHECK-LABEL: --- Running 'once'
func.func @once() -> (i32, i32) {
  %x = tfrt.constant.i32 21
  // CHECK-NEXT: int32 = 21
  %a = tfrt.once @print_once(%x) : (i32) -> (i32)
  %b = tfrt.once @print_once(%a) : (i32) -> (i32)
  // CHECK-NEXT: 'once' returned 42,42
  tfrt.return %a, %b : i32, i32
}

// CHECK-LABEL: --- Running 'merge_chains_with_value'
func.func @merge_chains_with_value() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %x = tfrt.constant.i32 1
  %ch1 = tfrt.merge.chains %ch0, %x : !tfrt.chain, i32
  // CHECK-NEXT: 'merge_chains_with_value' returned !tfrt.chain value
  tfrt.return %ch1 : !tfrt.chain
}
