// RUN: tfrt_translate -mlir-to-bef --disable-optional-sections=true %s | tfrt_translate --bef-to-mlir --mlir-print-op-generic 2>&1 | FileCheck %s

// CHECK: Missing AttributeTypes, AttributeNames or RegisterTypes sections.
func.func @f() {
  // CHECK: "simple.op"() {attr0 = 0xdeadbeef : i32} : () -> {{\(?}}none
  %x = "simple.op"() {value = 1 : i32} : () -> i32
  tfrt.return
}
