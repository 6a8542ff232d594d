// RUN: tfrt_opt %s | FileCheck %s
// RUN: tfrt_opt %s | tfrt_opt | FileCheck %s

// CHECK-LABEL: func.func @basics(%arg0: i32) -> (i32, !tfrt.chain)
func.func @basics(%x: i32) -> (i32, !tfrt.chain) {
  // CHECK-NEXT: %0 = tfrt.new.chain
  %ch0 = tfrt.new.chain
  // CHECK-NEXT: %1 = tfrt.constant.i32 42
  %c = tfrt.constant.i32 42
  // CHECK-NEXT: %2 = tfrt.constant.f32 1.000000e-01
  %f = tfrt.constant.f32 0.1
  // CHECK-NEXT: %3 = tfrt.constant.i1 true
  %b = tfrt.constant.i1 1
  // CHECK-NEXT: %4 = tfrt.add.i32 %arg0, %1
  %y = tfrt.add.i32 %x, %c
  // CHECK-NEXT: %5:2 = tfrt.div.i32 %4, %1
  %q, %r = tfrt.div.i32 %y, %c
  // CHECK-NEXT: %6 = tfrt.print.i32 %5#1, %0
  %ch1 = tfrt.print.i32 %r, %ch0
  // CHECK-NEXT: %7 = tfrt.merge.chains %6, %5#0 : !tfrt.chain, i32
  %ch2 = tfrt.merge.chains %ch1, %q : !tfrt.chain, i32
  // CHECK-NEXT: %8 = tfrt.call @callee(%4) : (i32) -> i32
  %z = tfrt.call @callee(%y) : (i32) -> i32
  // CHECK-NEXT: %9 = tfrt.if %3, %8 : (i32) -> (i32) {
  // CHECK-NEXT:   %12 = tfrt.add.i32 %8, %8
  // CHECK-NEXT:   tfrt.return %12 : i32
  // CHECK-NEXT: } else {
  // CHECK-NEXT:   tfrt.return %8 : i32
  // CHECK-NEXT: }
  %w = tfrt.if %b, %z : (i32) -> (i32) {
    %w2 = tfrt.add.i32 %z, %z
    tfrt.return %w2 : i32
  } else {
    tfrt.return %z : i32
  }
  // CHECK-NEXT: %10 = tfrt.repeat.i32 %1, %9 : i32 {
  // CHECK-NEXT:   %12 = tfrt.add.i32 %9, %9
  // CHECK-NEXT:   tfrt.return %12 : i32
  // CHECK-NEXT: }
  %v = tfrt.repeat.i32 %c, %w : i32 {
    %v2 = tfrt.add.i32 %w, %w
    tfrt.return %v2 : i32
  }
  // CHECK-NEXT: %11 = tfrt_test.test_cost %10 {_tfrt_cost = 3, id = 0} : i32
  %t = tfrt_test.test_cost %v {id = 0 : i64, _tfrt_cost = 3 : i64} : i32
  // CHECK-NEXT: tfrt.return %11, %7 : i32, !tfrt.chain
  tfrt.return %t, %ch2 : i32, !tfrt.chain
}

// CHECK-LABEL: func.func @callee(%arg0: i32) -> i32
func.func @callee(%x: i32) -> i32 {
  // CHECK: %1 = tfrt.while %{{.*}} @body(%arg0) parallel_iterations(2) : (i32) -> (i32)
  %c = tfrt.constant.i1 0
  %r = tfrt.while %c @body(%x) parallel_iterations(2) : (i32) -> (i32)
  // CHECK: tfrt.cond %{{.*}} @callee @callee (%arg0) : (i32) -> (i32)
  %s = tfrt.cond %c @callee @callee (%x) : (i32) -> (i32)
  // CHECK: tfrt.case %{{.*}} [@callee, @callee] (%arg0) : (i32) -> (i32)
  %i = tfrt.constant.i32 0
  %t = tfrt.case %i [@callee, @callee] (%x) : (i32) -> (i32)
  // CHECK: tfrt.once @callee(%arg0) : (i32) -> (i32)
  %o = tfrt.once @callee(%x) : (i32) -> (i32)
  tfrt.return %r : i32
}

func.func @body(%x: i32) -> (i32, i1) {
  %c = tfrt.constant.i1 0
  tfrt.return %x, %c : i32, i1
}

// CHECK-LABEL: func.func @tests()
func.func @tests() {
  %ch = tfrt.new.chain
  %n = tfrt.constant.i32 3
  // CHECK: tfrt_test.benchmark "add.i32"(%{{.*}} : i32) duration_secs = 1, max_count = 100, num_warmup_runs = 1 {
  %b = tfrt_test.benchmark "add.i32"(%n : i32) duration_secs = 1, max_count = 100 {
    %s = tfrt.add.i32 %n, %n
    tfrt.return %s : i32
  }
  // CHECK: %{{.*}}:3 = tfrt_test.count3.i32 %{{.*}}
  %a, %b2, %c = tfrt_test.count3.i32 %n
  // CHECK: tfrt_test.do.async %{{.*}} : (i32) -> i32 {
  %d = tfrt_test.do.async %n : (i32) -> (i32) {
    tfrt.return %n : i32
  }
  // CHECK: tfrt.parallel_for.i32 %{{.*}} to %{{.*}} fixed %{{.*}} {
  %e = tfrt.constant.i32 9
  %done = tfrt.parallel_for.i32 %n to %e fixed %a {
    tfrt.return
  }
  tfrt.return
}
