// RUN: tfrt_translate -mlir-to-bef --disable-optional-sections=true %s | tfrt_translate --bef-to-mlir --mlir-print-op-generic 2>&1 | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_to_mlir/disable_optional_sections.mlir:
// without the optional sections the reader warns and uses placeholder names and `none` types;
// --mlir-print-op-generic prints the module and functions generically too, as the MLIR of
// TFRT's published files does ("builtin.func", attributes `sym_name` and `type` after the body).

// CHECK: Missing AttributeTypes, AttributeNames or RegisterTypes sections.
// CHECK-NEXT: "builtin.module"() ({
// CHECK-NEXT: "builtin.func"() ({
func.func @basic() -> i32 {
  // CHECK-NEXT: %[[X:.*]] = "simple.op"() {attr0 = 0xdeadbeef : i32} : () -> {{\(?}}none
  %x = "simple.op"() {value = 1 : i32} : () -> i32
  // CHECK-NEXT: "tfrt.return"(%[[X]]) : (none) -> ()
  tfrt.return %x : i32
}
// CHECK-NEXT: }) {sym_name = "basic", type = () -> i32} : () -> ()

// CHECK-NEXT: "builtin.func"() ({
// CHECK-NEXT: ^bb0(%[[A:.*]]: i32, %{{.*}}: f32):
// CHECK-NEXT: "tfrt.return"(%[[A]]) : (i32) -> ()
// CHECK-NEXT: }) {sym_name = "args", type = (i32, f32) -> i32} : () -> ()
func.func @args(%a: i32, %b: f32) -> i32 {
  tfrt.return %a : i32
}

// CHECK-NEXT: "builtin.func"() ({
// CHECK-NEXT: "tfrt.return"() : () -> ()
// CHECK-NEXT: }) {sym_name = "none", type = () -> ()} : () -> ()
// CHECK-NEXT: }) : () -> ()
func.func @none() {
  tfrt.return
}
