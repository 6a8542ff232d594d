// RUN: tfrt_translate -bef-to-mlir %s.bef | tfrt_opt | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_to_mlir/sync_function.mlir: the `tfrt.sync`
// attribute is restored.

// CHECK-LABEL: func.func @sync_add(%arg0: i32, %arg1: i32) -> i32 attributes {tfrt.sync}
func.func @sync_add(%a: i32, %b: i32) -> i32 attributes {tfrt.sync} {
  // CHECK-NEXT: %0 = "tfrt.add_s.i32"(%arg0, %arg1) : (i32, i32) -> i32
  %c = "tfrt.add_s.i32"(%a, %b) : (i32, i32) -> i32
  tfrt.return %c : i32
}
