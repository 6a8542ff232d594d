// RUN: tfrt_translate -bef-to-mlir %s.bef | tfrt_opt | FileCheck %s

// CHECK-LABEL: func.func @add(%arg0: i32, %arg1: i32) -> i32
func.func @add(%a: i32, %b: i32) -> i32 {
  // CHECK-NEXT: %0 = tfrt.add.i32 %arg0, %arg1
  %c = tfrt.add.i32 %a, %b
  // CHECK-NEXT: tfrt.return %0 : i32
  tfrt.return %c : i32
}

// CHECK-LABEL: func.func @control(%arg0: i1, %arg1: i32) -> i32
func.func @control(%c: i1, %x: i32) -> i32 {
  // CHECK-NEXT: %0 = tfrt.call @add(%arg1, %arg1) : (i32, i32) -> i32
  %y = tfrt.call @add(%x, %x) : (i32, i32) -> i32
  // CHECK-NEXT: %1 = tfrt.if %arg0, %0 : (i32) -> (i32) {
  // CHECK-NEXT:   tfrt.return %0 : i32
  // CHECK-NEXT: } else {
  // CHECK-NEXT:   %2 = tfrt.add.i32 %0, %0
  %z = tfrt.if %c, %y : (i32) -> (i32) {
    tfrt.return %y : i32
  } else {
    %w = tfrt.add.i32 %y, %y
    tfrt.return %w : i32
  }
  tfrt.return %z : i32
}

// CHECK-LABEL: func.func @sync(%arg0: i32) -> i32 attributes {tfrt.sync}
func.func @sync(%a: i32) -> i32 attributes {tfrt.sync} {
  %b = "tfrt.add_s.i32"(%a, %a) : (i32, i32) -> i32
  tfrt.return %b : i32
}

// CHECK-LABEL: func.func private @native(i32) -> i32 attributes {tfrt.native}
func.func private @native(i32) -> i32 attributes {tfrt.native}
