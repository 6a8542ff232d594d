// Function calls and control flow of the tfrt dialect (docs/executor.md), on both work queues.
// RUN: bef_executor %s.bef | FileCheck %s
// RUN: bef_executor -work_queue_type=mstd:2 %s.bef | FileCheck %s

func.func private @add_one(%x: i32) -> i32 {
  %one = tfrt.constant.i32 1
  %y = tfrt.add.i32 %x, %one
  tfrt.return %y : i32
}

// CHECK-LABEL: --- Running 'call'
func.func @call() -> i32 {
  %x = tfrt.constant.i32 41
  %y = tfrt.call @add_one(%x) : (i32) -> i32
  // CHECK: 'call' returned 42
  tfrt.return %y : i32
}

// CHECK-LABEL: --- Running 'if_regions'
func.func @if_regions() -> (i32, i32) {
  %t = tfrt.constant.i1 1
  %f = tfrt.constant.i1 0
  %a = tfrt.constant.i32 10
  %r1 = tfrt.if %t, %a : (i32) -> (i32) {
    %y = tfrt.add.i32 %a, %a
    tfrt.return %y : i32
  } else {
    %z = tfrt.minus.i32 %a, %a
    tfrt.return %z : i32
  }
  %r2 = tfrt.if %f, %a : (i32) -> (i32) {
    %y = tfrt.add.i32 %a, %a
    tfrt.return %y : i32
  } else {
    %z = tfrt.minus.i32 %a, %a
    tfrt.return %z : i32
  }
  // CHECK: 'if_regions' returned 20,0
  tfrt.return %r1, %r2 : i32, i32
}

// CHECK-LABEL: --- Running 'if_without_else'
func.func @if_without_else() {
  %ch0 = tfrt.new.chain
  %t = tfrt.constant.i1 1
  %f = tfrt.constant.i1 0
  // CHECK-NEXT: hello host executor!
  tfrt.if %t, %ch0 : (!tfrt.chain) -> () {
    %ch1 = "tfrt_test.print_hello"(%ch0) : (!tfrt.chain) -> !tfrt.chain
    tfrt.return
  }
  // CHECK-NOT: hello
  tfrt.if %f, %ch0 : (!tfrt.chain) -> () {
    %ch1 = "tfrt_test.print_hello"(%ch0) : (!tfrt.chain) -> !tfrt.chain
    tfrt.return
  }
  tfrt.return
}

func.func private @double(%x: i32) -> i32 {
  %y = tfrt.add.i32 %x, %x
  tfrt.return %y : i32
}

func.func private @negate(%x: i32) -> i32 {
  %zero = tfrt.constant.i32 0
  %y = tfrt.minus.i32 %zero, %x
  tfrt.return %y : i32
}

// CHECK-LABEL: --- Running 'cond'
func.func @cond() -> (i32, i32) {
  %t = tfrt.constant.i1 1
  %f = tfrt.constant.i1 0
  %a = tfrt.constant.i32 7
  %r1 = tfrt.cond %t @double @negate (%a) : (i32) -> (i32)
  %r2 = tfrt.cond %f @double @negate (%a) : (i32) -> (i32)
  // CHECK: 'cond' returned 14,-7
  tfrt.return %r1, %r2 : i32, i32
}

func.func private @branch0(%ch: !tfrt.chain, %x: i32) -> (!tfrt.chain, i32) {
  %ch1 = tfrt.print.i32 %x, %ch
  tfrt.return %ch1, %x : !tfrt.chain, i32
}

func.func private @branch1(%ch: !tfrt.chain, %x: i32) -> (!tfrt.chain, i32) {
  %y = tfrt.add.i32 %x, %x
  %ch1 = tfrt.print.i32 %y, %ch
  tfrt.return %ch1, %y : !tfrt.chain, i32
}

// CHECK-LABEL: --- Running 'case'
func.func @case() -> (i32, i32, i32) {
  %ch0 = tfrt.new.chain
  %a = tfrt.constant.i32 5
  %i0 = tfrt.constant.i32 0
  %i1 = tfrt.constant.i32 1
  %i9 = tfrt.constant.i32 9
  // CHECK-NEXT: int32 = 5
  %ch1, %r0 = tfrt.case %i0 [@branch0, @branch1] (%ch0, %a) : (!tfrt.chain, i32) -> (!tfrt.chain, i32)
  // CHECK-NEXT: int32 = 10
  %ch2, %r1 = tfrt.case %i1 [@branch0, @branch1] (%ch1, %a) : (!tfrt.chain, i32) -> (!tfrt.chain, i32)
  // An index out of range selects the last branch.
  // CHECK-NEXT: int32 = 10
  %ch3, %r2 = tfrt.case %i9 [@branch0, @branch1] (%ch2, %a) : (!tfrt.chain, i32) -> (!tfrt.chain, i32)
  // CHECK-NEXT: 'case' returned 5,10,10
  tfrt.return %r0, %r1, %r2 : i32, i32, i32
}

// Sums 0 + 1 + ... + (n - 1) while printing each step.
func.func private @while_body(%ch: !tfrt.chain, %i: i32, %acc: i32) -> (!tfrt.chain, i32, i32, i1) {
  %one = tfrt.constant.i32 1
  %ten = tfrt.constant.i32 9
  %acc1 = tfrt.add.i32 %acc, %i
  %ch1 = tfrt.print.i32 %acc1, %ch
  %i1 = tfrt.add.i32 %i, %one
  %more = "tfrt.lessequal.i32"(%i1, %ten) : (i32, i32) -> i1
  tfrt.return %ch1, %i1, %acc1, %more : !tfrt.chain, i32, i32, i1
}

// CHECK-LABEL: --- Running 'while_inline'
func.func @while_inline() -> (i32, i32) {
  %ch0 = tfrt.new.chain
  %zero = tfrt.constant.i32 0
  %t = tfrt.constant.i1 1
  // CHECK-NEXT: int32 = 0
  // CHECK-NEXT: int32 = 1
  // CHECK-NEXT: int32 = 3
  // CHECK: int32 = 45
  %r:3 = tfrt.while %t @while_body(%ch0, %zero, %zero) parallel_iterations(1) : (!tfrt.chain, i32, i32) -> (!tfrt.chain, i32, i32)
  // CHECK-NEXT: 'while_inline' returned 10,45
  tfrt.return %r#1, %r#2 : i32, i32
}

// CHECK-LABEL: --- Running 'while_parallel'
func.func @while_parallel() -> (i32, i32) {
  %ch0 = tfrt.new.chain
  %zero = tfrt.constant.i32 0
  %t = tfrt.constant.i1 1
  // CHECK-NEXT: int32 = 0
  // CHECK-NEXT: int32 = 1
  // CHECK: int32 = 45
  %r:3 = tfrt.while %t @while_body(%ch0, %zero, %zero) parallel_iterations(4) : (!tfrt.chain, i32, i32) -> (!tfrt.chain, i32, i32)
  // CHECK-NEXT: 'while_parallel' returned 10,45
  tfrt.return %r#1, %r#2 : i32, i32
}

// CHECK-LABEL: --- Running 'while_false'
func.func @while_false() -> i32 {
  %ch0 = tfrt.new.chain
  %seven = tfrt.constant.i32 7
  %f = tfrt.constant.i1 0
  %r:3 = tfrt.while %f @while_body(%ch0, %seven, %seven) parallel_iterations(1) : (!tfrt.chain, i32, i32) -> (!tfrt.chain, i32, i32)
  // CHECK-NEXT: 'while_false' returned 7
  tfrt.return %r#2 : i32
}

func.func private @make_hello(%x: i32) -> (i32, !tfrt.chain) {
  %ch0 = tfrt.new.chain
  %ch1 = "tfrt_test.print_hello"(%ch0) : (!tfrt.chain) -> !tfrt.chain
  %y = tfrt.add.i32 %x, %x
  tfrt.return %y, %ch1 : i32, !tfrt.chain
}

// CHECK-LABEL: --- Running 'once'
func.func @once() -> (i32, i32, !tfrt.chain, !tfrt.chain) {
  %x = tfrt.constant.i32 21
  // The function body runs (and prints) only once per run.
  // CHECK-NEXT: hello host executor!
  // CHECK-NEXT: 'once' returned 42,42,!tfrt.chain value,!tfrt.chain value
  %a, %c1 = tfrt.once @make_hello(%x) : (i32) -> (i32, !tfrt.chain)
  %b, %c2 = tfrt.once @make_hello(%x) : (i32) -> (i32, !tfrt.chain)
  tfrt.return %a, %b, %c1, %c2 : i32, i32, !tfrt.chain, !tfrt.chain
}

// CHECK-LABEL: --- Running 'repeat'
func.func @repeat() -> (i32, i32) {
  %n = tfrt.constant.i32 5
  %zero = tfrt.constant.i32 0
  %one = tfrt.constant.i32 1
  // Fibonacci: (a, b) -> (b, a + b), five times.
  %a, %b = tfrt.repeat.i32 %n, %zero, %one : i32, i32 {
    %c = tfrt.add.i32 %zero, %one
    tfrt.return %one, %c : i32, i32
  }
  // CHECK: 'repeat' returned 5,8
  tfrt.return %a, %b : i32, i32
}

// CHECK-LABEL: --- Running 'repeat_large'
func.func @repeat_large() -> i32 {
  %n = tfrt.constant.i32 1000
  %zero = tfrt.constant.i32 0
  %r = tfrt.repeat.i32 %n, %zero : i32 {
    %one = tfrt.constant.i32 1
    %y = tfrt.add.i32 %zero, %one
    tfrt.return %y : i32
  }
  // CHECK: 'repeat_large' returned 1000
  tfrt.return %r : i32
}

// CHECK-LABEL: --- Running 'repeat_async'
func.func @repeat_async() -> i32 {
  %n = tfrt.constant.i32 100
  %zero = tfrt.constant.i32 0
  %r = tfrt.repeat.i32 %n, %zero : i32 {
    %one = tfrt.constant.i32 1
    %y = "tfrt_test.async_add.i32"(%zero, %one) : (i32, i32) -> i32
    tfrt.return %y : i32
  }
  // CHECK: 'repeat_async' returned 100
  tfrt.return %r : i32
}

// CHECK-LABEL: --- Running 'repeat_no_values'
func.func @repeat_no_values() {
  %n = tfrt.constant.i32 3
  // CHECK-NEXT: hello host executor!
  // CHECK-NEXT: hello host executor!
  // CHECK-NEXT: hello host executor!
  tfrt.repeat.i32 %n {
    %ch0 = tfrt.new.chain
    %ch1 = "tfrt_test.print_hello"(%ch0) : (!tfrt.chain) -> !tfrt.chain
    tfrt.return
  }
  tfrt.return
}

// CHECK-LABEL: --- Running 'repeat_cancel'
func.func @repeat_cancel() -> i32 {
  %n = tfrt.constant.i32 10
  %zero = tfrt.constant.i32 0
  %ch0 = tfrt.new.chain
  %r, %ch = tfrt.repeat.i32 %n, %zero, %ch0 : i32, !tfrt.chain {
    %x, %ch1 = "tfrt_test.cancel"(%ch0) : (!tfrt.chain) -> (i32, !tfrt.chain)
    tfrt.return %x, %ch1 : i32, !tfrt.chain
  }
  // CHECK-NEXT: 'repeat_cancel' returned <<error: Cancelled>>
  tfrt.return %r : i32
}

// CHECK-LABEL: --- Running 'merge_chains_value'
func.func @merge_chains_value() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %ch1 = tfrt.new.chain
  %x = tfrt.constant.i32 3
  %ch2 = tfrt.merge.chains %ch0, %ch1, %x : !tfrt.chain, !tfrt.chain, i32
  // CHECK-NEXT: 'merge_chains_value' returned !tfrt.chain value
  tfrt.return %ch2 : !tfrt.chain
}
