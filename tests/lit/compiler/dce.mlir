// no_bef_translation
// RUN: tfrt_opt -tg-dce %s | FileCheck %s

// Unused pure ops go; stateful ops stay even when nothing uses them; so do functions that
// control flow calls, while unreferenced functions go.
// CHECK-NOT: func.func @unused
func.func @unused(%a: tensor<f32>) -> tensor<f32> {
  func.return %a : tensor<f32>
}
// CHECK-LABEL: func.func @branch
func.func @branch(%a: tensor<f32>) -> tensor<f32> {
  %b = "tg.neg"(%a) : (tensor<f32>) -> tensor<f32>
  func.return %b : tensor<f32>
}
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<f32>, %p: tensor<i1>) -> tensor<f32> {
  // CHECK-NOT: "tg.exp"
  // CHECK-NOT: "tg.log"
  %dead = "tg.exp"(%x) : (tensor<f32>) -> tensor<f32>
  %dead2 = "tg.log"(%dead) : (tensor<f32>) -> tensor<f32>
  // CHECK: "tg.assign_add_variable"(%arg0) {name = "v"}
  "tg.assign_add_variable"(%x) {name = "v"} : (tensor<f32>) -> ()
  // CHECK: %[[R:.*]] = "tg.if"(%arg1, %arg0) {else_branch = @branch, then_branch = @branch}
  %r = "tg.if"(%p, %x) {then_branch = @branch, else_branch = @branch} : (tensor<i1>, tensor<f32>) -> tensor<f32>
  // CHECK: func.return %[[R]]
  func.return %r : tensor<f32>
}
