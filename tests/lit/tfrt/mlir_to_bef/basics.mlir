// RUN: tfrt_translate --bef-to-mlir %s.bef | FileCheck %s

// Reconstruction of TFRT's mlir_tests/mlir_to_bef/basics.mlir: translation of
// unregistered ops with attributes, arguments and a call succeeds.

// The BEF holds both functions with their kernels and attributes.
// CHECK-LABEL: func.func @basic(%arg0: i32) -> i32
// CHECK-NEXT: "simple.kernel"(%arg0) {arr = [1 : i32, 2 : i32], str = "hello", value = 42 : i32} : (i32) -> i32
// CHECK-NEXT: "simple.kernel"(%0, %arg0) : (i32, i32) -> i32
// CHECK-LABEL: func.func @caller() -> i32
// CHECK-NEXT: tfrt.constant.i32 1
// CHECK-NEXT: tfrt.call @basic(%0) : (i32) -> i32
func.func @basic(%x: i32) -> i32 {
  %a = "simple.kernel"(%x) {value = 42 : i32, str = "hello", arr = [1 : i32, 2 : i32]} : (i32) -> i32
  %b = "simple.kernel"(%a, %x) : (i32, i32) -> i32
  tfrt.return %b : i32
}

func.func @caller() -> i32 {
  %c = tfrt.constant.i32 1
  %r = tfrt.call @basic(%c) : (i32) -> i32
  tfrt.return %r : i32
}
