// no_bef_translation
// RUN: tfrt_opt -tg-fuse-softmax-grad %s | FileCheck %s

// An attention's softmax gradient as TF imports it: (dy - sum(dy * y)) * y, then a scale.
// CHECK-LABEL: func.func @attention
func.func @attention(%x: tensor<?x4x16x16xf32>, %dy: tensor<?x4x16x16xf32>) -> (tensor<?x4x16x16xf32>, tensor<?x4x16x16xf32>) {
  %y = "tg.softmax"(%x) {axis = 3} : (tensor<?x4x16x16xf32>) -> tensor<?x4x16x16xf32>
  %p = "tg.mul"(%dy, %y) : (tensor<?x4x16x16xf32>, tensor<?x4x16x16xf32>) -> tensor<?x4x16x16xf32>
  %s = "tg.reduce_sum"(%p) {axes = [3], keepdims = true} : (tensor<?x4x16x16xf32>) -> tensor<?x4x16x1xf32>
  %d = "tg.sub"(%dy, %s) : (tensor<?x4x16x16xf32>, tensor<?x4x16x1xf32>) -> tensor<?x4x16x16xf32>
  %r = "tg.mul"(%d, %y) : (tensor<?x4x16x16xf32>, tensor<?x4x16x16xf32>) -> tensor<?x4x16x16xf32>
  %c = "tg.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %o = "tg.mul"(%r, %c) : (tensor<?x4x16x16xf32>, tensor<f32>) -> tensor<?x4x16x16xf32>
  // CHECK: %[[Y:.*]] = "tg.softmax"(%arg0)
  // CHECK-NOT: "tg.reduce_sum"
  // CHECK-NOT: "tg.sub"
  // CHECK: %[[G:.*]] = "tg.softmax_grad"(%[[Y]], %arg1) {axis = 3{{( : i64)?}}} : (tensor<?x4x16x16xf32>, tensor<?x4x16x16xf32>) -> tensor<?x4x16x16xf32>
  // CHECK: "tg.mul"(%[[G]], %{{.*}})
  func.return %o, %y : tensor<?x4x16x16xf32>, tensor<?x4x16x16xf32>
}

// The operands of both multiplies swapped, a negative axis in the reduction.
// CHECK-LABEL: func.func @swapped
func.func @swapped(%x: tensor<2x8xf32>, %dy: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %y = "tg.softmax"(%x) {axis = -1} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %p = "tg.mul"(%y, %dy) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %s = "tg.reduce_sum"(%p) {axes = [-1], keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %d = "tg.sub"(%dy, %s) : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %r = "tg.mul"(%y, %d) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: "tg.softmax_grad"(%{{.*}}, %arg1) {axis = 1{{( : i64)?}}}
  // CHECK-NEXT: func.return
  func.return %r : tensor<2x8xf32>
}

// Kept: the sum read elsewhere, the sum over another axis than the softmax's.
// CHECK-LABEL: func.func @kept
func.func @kept(%x: tensor<2x8xf32>, %dy: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x8xf32>) {
  %y = "tg.softmax"(%x) {axis = 1} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %p = "tg.mul"(%dy, %y) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %s = "tg.reduce_sum"(%p) {axes = [1], keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %d = "tg.sub"(%dy, %s) : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %r = "tg.mul"(%d, %y) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %p2 = "tg.mul"(%dy, %y) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %s2 = "tg.reduce_sum"(%p2) {axes = [0], keepdims = true} : (tensor<2x8xf32>) -> tensor<1x8xf32>
  %d2 = "tg.sub"(%dy, %s2) : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %r2 = "tg.mul"(%d2, %y) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK-NOT: "tg.softmax_grad"
  func.return %r, %s, %r2 : tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x8xf32>
}
