// RUN: tfrt_translate -mlir-to-bef --disable-optional-sections=true %s | tfrt_translate --bef-to-mlir --mlir-print-op-generic 2>&1 | FileCheck %s --dump-input=fail
// RUN: tfrt_translate -mlir-to-bef --disable-optional-sections=true %s | env PYTFRT_TFRT_REVISION=de22adc4 tfrt_translate --bef-to-mlir --mlir-print-op-generic 2>&1 | FileCheck %s --check-prefix=OLD

// Modelled on TFRT's mlir_tests/bef_to_mlir/disable_optional_sections.mlir: without the
// optional sections the reader warns and uses placeholder names and `none` types;
// --mlir-print-op-generic prints the module and functions generically too: "func.func" with
// its inherent attributes as properties before the body (TFRT's main branch), or, as the MLIR
// of TFRT de22adc4 did (OLD), "builtin.func" with `sym_name` and `type` after the body.

// CHECK: Missing AttributeTypes, AttributeNames or RegisterTypes sections.
// CHECK-NEXT: "builtin.module"() ({
// CHECK-NEXT: "func.func"() <{function_type = () -> i32, sym_name = "basic"}> ({
// OLD: Missing AttributeTypes, AttributeNames or RegisterTypes sections.
// OLD-NEXT: "builtin.module"() ({
// OLD-NEXT: "builtin.func"() ({
func.func @basic() -> i32 {
  // CHECK-NEXT: %[[X:.*]] = "simple.op"() {attr0 = 0xdeadbeef : i32} : () -> {{\(?}}none
  // OLD-NEXT: %[[X:.*]] = "simple.op"() {attr0 = 0xdeadbeef : i32} : () -> {{\(?}}none
  %x = "simple.op"() {value = 1 : i32} : () -> i32
  // CHECK-NEXT: "tfrt.return"(%[[X]]) : (none) -> ()
  // OLD-NEXT: "tfrt.return"(%[[X]]) : (none) -> ()
  tfrt.return %x : i32
}
// CHECK-NEXT: }) : () -> ()
// OLD-NEXT: }) {sym_name = "basic", type = () -> i32} : () -> ()

// CHECK-NEXT: "func.func"() <{function_type = (i32, f32) -> i32, sym_name = "args"}> ({
// CHECK-NEXT: ^bb0(%[[A:.*]]: i32, %{{.*}}: f32):
// CHECK-NEXT: "tfrt.return"(%[[A]]) : (i32) -> ()
// CHECK-NEXT: }) : () -> ()
// OLD-NEXT: "builtin.func"() ({
// OLD-NEXT: ^bb0(%[[A:.*]]: i32, %{{.*}}: f32):
// OLD-NEXT: "tfrt.return"(%[[A]]) : (i32) -> ()
// OLD-NEXT: }) {sym_name = "args", type = (i32, f32) -> i32} : () -> ()
func.func @args(%a: i32, %b: f32) -> i32 {
  tfrt.return %a : i32
}

// CHECK-NEXT: "func.func"() <{function_type = () -> (), sym_name = "none"}> ({
// CHECK-NEXT: "tfrt.return"() : () -> ()
// CHECK-NEXT: }) : () -> ()
// CHECK-NEXT: }) : () -> ()
// OLD-NEXT: "builtin.func"() ({
// OLD-NEXT: "tfrt.return"() : () -> ()
// OLD-NEXT: }) {sym_name = "none", type = () -> ()} : () -> ()
// OLD-NEXT: }) : () -> ()
func.func @none() {
  tfrt.return
}
