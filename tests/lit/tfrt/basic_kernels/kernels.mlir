// RUN: tfrt_opt -allow-unregistered-dialect %s | tfrt_opt -allow-unregistered-dialect | tfrt_opt -allow-unregistered-dialect | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/basic_kernels/kernels.mlir: the custom printers
// of tfrt.if / tfrt.repeat.i32 / tfrt.return / tfrt.constant.* survive a print/parse round trip.

// CHECK-LABEL: func @if(
func.func @if(%cond: i1, %v1: i32, %v2: i32) -> i32 {
  // CHECK: tfrt.if %{{.*}}, %{{.*}}, %{{.*}} : (i32, i32) -> (i32) {
  %res = tfrt.if %cond, %v1, %v2 : (i32, i32) -> (i32) {
    // CHECK-NEXT: tfrt.return %{{.*}} : i32
    tfrt.return %v1 : i32
  // CHECK-NEXT: } else {
  } else {
    // CHECK-NEXT: tfrt.return %{{.*}} : i32
    tfrt.return %v2 : i32
  }
  tfrt.return %res : i32
}

// CHECK-LABEL: func @if_no_results(
func.func @if_no_results(%cond: i1, %v1: i32) {
  // CHECK: tfrt.if %{{.*}}, %{{.*}} : (i32) -> () {
  tfrt.if %cond, %v1 : (i32) -> () {
    "someop"(%v1) : (i32) -> ()
    tfrt.return
  // The defaulted else region is printed too.
  // CHECK: } else {
  // CHECK-NEXT: tfrt.return
  }
  tfrt.return
}

// CHECK-LABEL: func @repeat(
func.func @repeat(%arg: i32) -> i32 {
  // CHECK: [[C2:%.*]] = tfrt.constant.i32 2
  %count = tfrt.constant.i32 2
  // CHECK-NEXT: tfrt.repeat.i32 [[C2]], %{{.*}} : i32 {
  %res = tfrt.repeat.i32 %count, %arg : i32 {
    // CHECK-NEXT: "someop"
    %x = "someop"(%arg) : (i32) -> i32
    // CHECK-NEXT: tfrt.return %{{.*}} : i32
    tfrt.return %x : i32
  }
  tfrt.return %res : i32
}

// CHECK-LABEL: func @repeat_no_args(
func.func @repeat_no_args() {
  %count = tfrt.constant.i32 2
  // CHECK: tfrt.repeat.i32 %{{.*}} {
  tfrt.repeat.i32 %count {
    "someop"() : () -> ()
    // CHECK: tfrt.return
    tfrt.return
  }
  tfrt.return
}

// CHECK-LABEL: func @constants(
func.func @constants() {
  // CHECK: tfrt.constant.i1 true
  %a = tfrt.constant.i1 1
  // CHECK: tfrt.constant.ui32 5
  %b = tfrt.constant.ui32 5
  // CHECK: tfrt.constant.f32 1.000000e-01
  %c = tfrt.constant.f32 0.1
  "someop"(%a, %b, %c) : (i1, ui32, f32) -> ()
  tfrt.return
}
