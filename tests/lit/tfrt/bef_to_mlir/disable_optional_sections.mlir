// RUN: tfrt_translate -mlir-to-bef --disable-optional-sections=true %s | tfrt_translate --bef-to-mlir --mlir-print-op-generic 2>&1 | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_to_mlir/disable_optional_sections.mlir:
// without the optional sections the reader warns and uses placeholder names and `none` types.

// CHECK: Missing AttributeTypes, AttributeNames or RegisterTypes sections.
func.func @basic() -> i32 {
  // CHECK: "simple.op"() {attr0 = 0xdeadbeef : i32} : () -> {{\(?}}none
  %x = "simple.op"() {value = 1 : i32} : () -> i32
  // CHECK: "tfrt.return"(%{{.*}}) : (none) -> ()
  tfrt.return %x : i32
}
