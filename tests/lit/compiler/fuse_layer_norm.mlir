// no_bef_translation
// RUN: tfrt_opt -tg-fuse-layer-norm %s | FileCheck %s

// An opset-13 export's layer norm: mean, centre, square (Pow 2), mean, + eps, sqrt, divide,
// then gamma and beta (beta first in its add).
// CHECK-LABEL: func.func @written_out
func.func @written_out(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %m = "tg.reduce_mean"(%x) {axes = [-1], keepdims = true} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %d = "tg.sub"(%x, %m) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %two = "tg.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %q = "tg.pow"(%d, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %v = "tg.reduce_mean"(%q) {axes = [2], keepdims = true} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %eps = "tg.constant"() {value = dense<1.0e-05> : tensor<f32>} : () -> tensor<f32>
  %e = "tg.add"(%eps, %v) : (tensor<f32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %s = "tg.sqrt"(%e) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = "tg.div"(%d, %s) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %g = "tg.constant"() {value = dense<2.0> : tensor<8xf32>} : () -> tensor<8xf32>
  %ng = "tg.mul"(%n, %g) : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %b = "tg.constant"() {value = dense<0.5> : tensor<8xf32>} : () -> tensor<8xf32>
  %y = "tg.add"(%b, %ng) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NOT: tg.reduce_mean
  // CHECK: %[[G:.*]] = "tg.constant"() {value = dense<2.000000e+00> : tensor<8xf32>}
  // CHECK-NEXT: %[[B:.*]] = "tg.constant"() {value = dense<5.000000e-01> : tensor<8xf32>}
  // CHECK-NEXT: %[[Y:.*]] = "tg.layer_norm"(%arg0, %[[G]], %[[B]]) {axis = 2, epsilon = 9.99999974{{[0-9]*}}e-06, has_beta = true, has_gamma = true} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: func.return %[[Y]]
  func.return %y : tensor<?x?x8xf32>
}

// The square as d * d, over the last two axes, no gamma or beta.
// CHECK-LABEL: func.func @two_axes
func.func @two_axes(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %m = "tg.reduce_mean"(%x) {axes = [1, 2], keepdims = true} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %d = "tg.sub"(%x, %m) : (tensor<2x3x4xf32>, tensor<2x1x1xf32>) -> tensor<2x3x4xf32>
  %q = "tg.mul"(%d, %d) : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %v = "tg.reduce_mean"(%q) {axes = [-2, -1], keepdims = true} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %eps = "tg.constant"() {value = dense<1.0e-03> : tensor<1xf32>} : () -> tensor<1xf32>
  %e = "tg.add"(%v, %eps) : (tensor<2x1x1xf32>, tensor<1xf32>) -> tensor<2x1x1xf32>
  %s = "tg.sqrt"(%e) : (tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %n = "tg.div"(%d, %s) : (tensor<2x3x4xf32>, tensor<2x1x1xf32>) -> tensor<2x3x4xf32>
  // CHECK: %[[Y:.*]] = "tg.layer_norm"(%arg0) {axis = 1, epsilon = 0.00100000{{[0-9]*}}, has_beta = false, has_gamma = false} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK-NEXT: func.return %[[Y]]
  func.return %n : tensor<2x3x4xf32>
}

// Not fused: the centred value is also returned; a mean over a leading axis; a gamma that
// would widen the result (rank 4 against the normalised last axis) stays a multiply.
// CHECK-LABEL: func.func @kept
func.func @kept(%x: tensor<2x8xf32>, %z: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<1x1x2x8xf32>) {
  %m = "tg.reduce_mean"(%x) {axes = [1], keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %d = "tg.sub"(%x, %m) : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %q = "tg.mul"(%d, %d) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %v = "tg.reduce_mean"(%q) {axes = [1], keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %eps = "tg.constant"() {value = dense<1.0e-05> : tensor<f32>} : () -> tensor<f32>
  %e = "tg.add"(%v, %eps) : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = "tg.sqrt"(%e) : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n = "tg.div"(%d, %s) : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  // CHECK: "tg.reduce_mean"(%arg0) {axes = [1]
  // CHECK: "tg.div"
  %m0 = "tg.reduce_mean"(%z) {axes = [0], keepdims = true} : (tensor<2x8xf32>) -> tensor<1x8xf32>
  %d0 = "tg.sub"(%z, %m0) : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %q0 = "tg.mul"(%d0, %d0) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %v0 = "tg.reduce_mean"(%q0) {axes = [0], keepdims = true} : (tensor<2x8xf32>) -> tensor<1x8xf32>
  %e0 = "tg.add"(%v0, %eps) : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %s0 = "tg.sqrt"(%e0) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %n0 = "tg.div"(%d0, %s0) : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  // CHECK: "tg.reduce_mean"(%arg1) {axes = [0]
  // CHECK: "tg.div"
  %m1 = "tg.reduce_mean"(%z) {axes = [1], keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %d1 = "tg.sub"(%z, %m1) : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %q1 = "tg.mul"(%d1, %d1) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %v1 = "tg.reduce_mean"(%q1) {axes = [1], keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %e1 = "tg.add"(%v1, %eps) : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s1 = "tg.sqrt"(%e1) : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n1 = "tg.div"(%d1, %s1) : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %g = "tg.constant"() {value = dense<2.0> : tensor<1x1x1x8xf32>} : () -> tensor<1x1x1x8xf32>
  %w = "tg.mul"(%n1, %g) : (tensor<2x8xf32>, tensor<1x1x1x8xf32>) -> tensor<1x1x2x8xf32>
  // CHECK: %[[L:.*]] = "tg.layer_norm"(%arg1) {axis = 1, {{.*}}has_beta = false, has_gamma = false}
  // CHECK: "tg.mul"(%[[L]], %{{.*}}) : (tensor<2x8xf32>, tensor<1x1x1x8xf32>) -> tensor<1x1x2x8xf32>
  func.return %d, %n, %n0, %w : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<1x1x2x8xf32>
}
