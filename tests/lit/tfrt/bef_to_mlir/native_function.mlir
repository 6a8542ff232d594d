// RUN: tfrt_translate --bef-to-mlir %s.bef | tfrt_opt | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_to_mlir/native_function.mlir: a native
// function declaration is restored as a private declaration with `tfrt.native`.

// CHECK-LABEL: func.func private @native_add(i32, i32) -> i32 attributes {tfrt.native}
func.func private @native_add(%a: i32, %b: i32) -> i32 attributes {tfrt.native}

// CHECK-LABEL: func.func @call_native() -> i32
func.func @call_native() -> i32 {
  // CHECK-NEXT: %0 = tfrt.constant.i32 1
  %a = tfrt.constant.i32 1
  // CHECK-NEXT: %1 = tfrt.call @native_add(%0, %0) : (i32, i32) -> i32
  %r = tfrt.call @native_add(%a, %a) : (i32, i32) -> i32
  tfrt.return %r : i32
}
