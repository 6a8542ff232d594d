// no_bef_translation
// RUN: tfrt_opt -tg-infer-shapes %s | FileCheck %s

// Unknown dims and ranks are narrowed from the operands; the function type follows.
// CHECK-LABEL: func.func @main(%arg0: tensor<?x4xf32>) -> tensor<?x3xf32>
func.func @main(%x: tensor<?x4xf32>) -> tensor<*xf32> {
  %w = "tg.constant"() {value = dense<1.0> : tensor<4x3xf32>} : () -> tensor<4x3xf32>
  // CHECK: "tg.matmul"(%arg0, %0) {transpose_a = false, transpose_b = false} : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
  %y = "tg.matmul"(%x, %w) {transpose_a = false, transpose_b = false} : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<*xf32>
  // CHECK: "tg.relu"(%1) : (tensor<?x3xf32>) -> tensor<?x3xf32>
  %z = "tg.relu"(%y) : (tensor<*xf32>) -> tensor<*xf32>
  // CHECK: "tg.reshape"(%2) {shape = [-1, 1, 3]} : (tensor<?x3xf32>) -> tensor<?x1x3xf32>
  %r = "tg.reshape"(%z) {shape = [-1, 1, 3]} : (tensor<*xf32>) -> tensor<*xf32>
  // CHECK: "tg.reduce_sum"(%3) {axes = [1, 2], keepdims = false} : (tensor<?x1x3xf32>) -> tensor<?xf32>
  %s = "tg.reduce_sum"(%r) {axes = [1, 2], keepdims = false} : (tensor<*xf32>) -> tensor<*xf32>
  // CHECK: "tg.expand_dims"(%4) {axis = 1} : (tensor<?xf32>) -> tensor<?x1xf32>
  %e = "tg.expand_dims"(%s) {axis = 1} : (tensor<*xf32>) -> tensor<*xf32>
  // CHECK: "tg.add"(%5, %2) : (tensor<?x1xf32>, tensor<?x3xf32>) -> tensor<?x3xf32>
  %o = "tg.add"(%e, %z) : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  // CHECK: func.return %6 : tensor<?x3xf32>
  func.return %o : tensor<*xf32>
}
