// RUN: tfrt_translate --bef-to-mlir %s.bef | tfrt_opt | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_to_mlir/basics.mlir: functions, arguments,
// calls, if with regions and print chains are rebuilt from the BEF file.

// CHECK-LABEL: func.func @add(%arg0: i32, %arg1: i32) -> i32
func.func @add(%a: i32, %b: i32) -> i32 {
  // CHECK-NEXT: %0 = tfrt.add.i32 %arg0, %arg1
  %c = tfrt.add.i32 %a, %b
  // CHECK-NEXT: tfrt.return %0 : i32
  tfrt.return %c : i32
}

// CHECK-LABEL: func.func @print(%arg0: i32) -> !tfrt.chain
func.func @print(%x: i32) -> !tfrt.chain {
  // CHECK-NEXT: %0 = tfrt.new.chain
  %ch0 = tfrt.new.chain
  // CHECK-NEXT: %1 = tfrt.print.i32 %arg0, %0
  %ch1 = tfrt.print.i32 %x, %ch0
  // CHECK-NEXT: tfrt.return %1 : !tfrt.chain
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: func.func @call_and_if(%arg0: i1, %arg1: i32) -> i32
func.func @call_and_if(%c: i1, %x: i32) -> i32 {
  // CHECK-NEXT: %0 = tfrt.call @add(%arg1, %arg1) : (i32, i32) -> i32
  %y = tfrt.call @add(%x, %x) : (i32, i32) -> i32
  // CHECK-NEXT: %1 = tfrt.if %arg0, %0 : (i32) -> (i32) {
  %z = tfrt.if %c, %y : (i32) -> (i32) {
    // CHECK-NEXT: tfrt.return %0 : i32
    tfrt.return %y : i32
  // CHECK-NEXT: } else {
  } else {
    // CHECK-NEXT: %2 = tfrt.add.i32 %0, %0
    %w = tfrt.add.i32 %y, %y
    // CHECK-NEXT: tfrt.return %2 : i32
    tfrt.return %w : i32
  }
  // CHECK: tfrt.return %1 : i32
  tfrt.return %z : i32
}

// CHECK-LABEL: func.func @constants() -> i32
func.func @constants() -> i32 {
  // CHECK-NEXT: %0 = tfrt.constant.i32 1
  %a = tfrt.constant.i32 1
  // CHECK-NEXT: %1 = tfrt.call @add(%0, %0) : (i32, i32) -> i32
  %b = tfrt.call @add(%a, %a) : (i32, i32) -> i32
  // CHECK-NEXT: tfrt.return %1 : i32
  tfrt.return %b : i32
}
