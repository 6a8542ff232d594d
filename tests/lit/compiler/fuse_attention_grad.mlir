// no_bef_translation
// RUN: tfrt_opt -tg-fuse-attention-grad %s | FileCheck %s

// Keras MultiHeadAttention's backward as TF imports it (after -tg-fuse-softmax-grad): the heads
// moved to the front by transposes around four batched matmuls, the softmax gradient, a scale.
// CHECK-LABEL: func.func @keras
func.func @keras(%q: tensor<?x16x4x8xf32>, %k: tensor<?x16x4x8xf32>, %v: tensor<?x16x4x8xf32>, %p: tensor<?x4x16x16xf32>, %dy: tensor<?x16x4x8xf32>) -> (tensor<?x16x4x8xf32>, tensor<?x16x4x8xf32>, tensor<?x16x4x8xf32>, tensor<?x4x16x8xf32>) {
  %c = "tg.constant"() {value = dense<0.353553385> : tensor<f32>} : () -> tensor<f32>
  %qt = "tg.transpose"(%q) {perm = [0, 2, 1, 3]} : (tensor<?x16x4x8xf32>) -> tensor<?x4x16x8xf32>
  %dyt = "tg.transpose"(%dy) {perm = [0, 2, 1, 3]} : (tensor<?x16x4x8xf32>) -> tensor<?x4x16x8xf32>
  %vT = "tg.transpose"(%v) {perm = [0, 2, 3, 1]} : (tensor<?x16x4x8xf32>) -> tensor<?x4x8x16xf32>
  %dp = "tg.matmul"(%dyt, %vT) {transpose_a = false, transpose_b = false} : (tensor<?x4x16x8xf32>, tensor<?x4x8x16xf32>) -> tensor<?x4x16x16xf32>
  %dyT = "tg.transpose"(%dy) {perm = [0, 2, 3, 1]} : (tensor<?x16x4x8xf32>) -> tensor<?x4x8x16xf32>
  %dvt = "tg.matmul"(%dyT, %p) {transpose_a = false, transpose_b = false} : (tensor<?x4x8x16xf32>, tensor<?x4x16x16xf32>) -> tensor<?x4x8x16xf32>
  %dv = "tg.transpose"(%dvt) {perm = [0, 3, 1, 2]} : (tensor<?x4x8x16xf32>) -> tensor<?x16x4x8xf32>
  %g = "tg.softmax_grad"(%p, %dp) {axis = 3} : (tensor<?x4x16x16xf32>, tensor<?x4x16x16xf32>) -> tensor<?x4x16x16xf32>
  %ds = "tg.mul"(%g, %c) : (tensor<?x4x16x16xf32>, tensor<f32>) -> tensor<?x4x16x16xf32>
  %kk = "tg.transpose"(%k) {perm = [0, 2, 1, 3]} : (tensor<?x16x4x8xf32>) -> tensor<?x4x16x8xf32>
  %dqt = "tg.matmul"(%ds, %kk) {transpose_a = false, transpose_b = false} : (tensor<?x4x16x16xf32>, tensor<?x4x16x8xf32>) -> tensor<?x4x16x8xf32>
  %dq = "tg.transpose"(%dqt) {perm = [0, 2, 1, 3]} : (tensor<?x4x16x8xf32>) -> tensor<?x16x4x8xf32>
  %dsT = "tg.transpose"(%ds) {perm = [0, 1, 3, 2]} : (tensor<?x4x16x16xf32>) -> tensor<?x4x16x16xf32>
  %dkt = "tg.matmul"(%dsT, %qt) {transpose_a = false, transpose_b = false} : (tensor<?x4x16x16xf32>, tensor<?x4x16x8xf32>) -> tensor<?x4x16x8xf32>
  %dk = "tg.transpose"(%dkt) {perm = [0, 2, 1, 3]} : (tensor<?x4x16x8xf32>) -> tensor<?x16x4x8xf32>
  // CHECK: %[[QT:.*]] = "tg.transpose"(%arg0) {perm = [0, 2, 1, 3]}
  // CHECK-NOT: "tg.matmul"
  // CHECK-NOT: "tg.softmax_grad"
  // CHECK: %[[G:.*]]:3 = "tg.attention_grad"(%arg0, %arg1, %arg2, %arg3, %arg4) {scale = 0.35355338{{[0-9]*}}{{( : f64)?}}} : (tensor<?x16x4x8xf32>, tensor<?x16x4x8xf32>, tensor<?x16x4x8xf32>, tensor<?x4x16x16xf32>, tensor<?x16x4x8xf32>) -> (tensor<?x16x4x8xf32>, tensor<?x16x4x8xf32>, tensor<?x16x4x8xf32>)
  // CHECK-NOT: "tg.transpose"
  // CHECK-NOT: "tg.matmul"
  // CHECK: func.return %[[G]]#0, %[[G]]#1, %[[G]]#2, %[[QT]]
  func.return %dq, %dk, %dv, %qt : tensor<?x16x4x8xf32>, tensor<?x16x4x8xf32>, tensor<?x16x4x8xf32>, tensor<?x4x16x8xf32>
}

// The other forms of the products: transpose flags on the matmuls, results transposed the other
// way, no scale (the softmax gradient read directly); Sq = 3 queries against Sk = 5 keys.
// CHECK-LABEL: func.func @flags
func.func @flags(%q: tensor<2x3x2x4xf32>, %k: tensor<2x5x2x4xf32>, %v: tensor<2x5x2x4xf32>, %p: tensor<2x2x3x5xf32>, %dy: tensor<2x3x2x4xf32>) -> (tensor<2x3x2x4xf32>, tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>) {
  %qt = "tg.transpose"(%q) {perm = [0, 2, 1, 3]} : (tensor<2x3x2x4xf32>) -> tensor<2x2x3x4xf32>
  %kt = "tg.transpose"(%k) {perm = [0, 2, 3, 1]} : (tensor<2x5x2x4xf32>) -> tensor<2x2x4x5xf32>
  %dyt = "tg.transpose"(%dy) {perm = [0, 2, 1, 3]} : (tensor<2x3x2x4xf32>) -> tensor<2x2x3x4xf32>
  %vt = "tg.transpose"(%v) {perm = [0, 2, 1, 3]} : (tensor<2x5x2x4xf32>) -> tensor<2x2x5x4xf32>
  %dp = "tg.matmul"(%dyt, %vt) {transpose_b = true} : (tensor<2x2x3x4xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x3x5xf32>
  %g = "tg.softmax_grad"(%p, %dp) {axis = -1} : (tensor<2x2x3x5xf32>, tensor<2x2x3x5xf32>) -> tensor<2x2x3x5xf32>
  %dvt = "tg.matmul"(%p, %dyt) {transpose_a = true} : (tensor<2x2x3x5xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x5x4xf32>
  %dv = "tg.transpose"(%dvt) {perm = [0, 2, 1, 3]} : (tensor<2x2x5x4xf32>) -> tensor<2x5x2x4xf32>
  %dqt = "tg.matmul"(%kt, %g) {transpose_b = true} : (tensor<2x2x4x5xf32>, tensor<2x2x3x5xf32>) -> tensor<2x2x4x3xf32>
  %dq = "tg.transpose"(%dqt) {perm = [0, 3, 1, 2]} : (tensor<2x2x4x3xf32>) -> tensor<2x3x2x4xf32>
  %dkt = "tg.matmul"(%g, %qt) {transpose_a = true} : (tensor<2x2x3x5xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x5x4xf32>
  %dk = "tg.transpose"(%dkt) {perm = [0, 2, 1, 3]} : (tensor<2x2x5x4xf32>) -> tensor<2x5x2x4xf32>
  // CHECK: %[[G:.*]]:3 = "tg.attention_grad"(%arg0, %arg1, %arg2, %arg3, %arg4) {scale = 1.0{{.*}}}
  // CHECK-NEXT: func.return %[[G]]#0, %[[G]]#1, %[[G]]#2
  func.return %dq, %dk, %dv : tensor<2x3x2x4xf32>, tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>
}

// Kept: the value gradient is not computed (only dq and dk), and dp read elsewhere.
// CHECK-LABEL: func.func @kept
func.func @kept(%q: tensor<2x3x2x4xf32>, %k: tensor<2x3x2x4xf32>, %v: tensor<2x3x2x4xf32>, %p: tensor<2x2x3x3xf32>, %dy: tensor<2x3x2x4xf32>) -> (tensor<2x3x2x4xf32>, tensor<2x3x2x4xf32>, tensor<2x2x3x3xf32>) {
  %qt = "tg.transpose"(%q) {perm = [0, 2, 1, 3]} : (tensor<2x3x2x4xf32>) -> tensor<2x2x3x4xf32>
  %dyt = "tg.transpose"(%dy) {perm = [0, 2, 1, 3]} : (tensor<2x3x2x4xf32>) -> tensor<2x2x3x4xf32>
  %vT = "tg.transpose"(%v) {perm = [0, 2, 3, 1]} : (tensor<2x3x2x4xf32>) -> tensor<2x2x4x3xf32>
  %dp = "tg.matmul"(%dyt, %vT) : (tensor<2x2x3x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x3x3xf32>
  %g = "tg.softmax_grad"(%p, %dp) {axis = 3} : (tensor<2x2x3x3xf32>, tensor<2x2x3x3xf32>) -> tensor<2x2x3x3xf32>
  %kk = "tg.transpose"(%k) {perm = [0, 2, 1, 3]} : (tensor<2x3x2x4xf32>) -> tensor<2x2x3x4xf32>
  %dqt = "tg.matmul"(%g, %kk) : (tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32>
  %dq = "tg.transpose"(%dqt) {perm = [0, 2, 1, 3]} : (tensor<2x2x3x4xf32>) -> tensor<2x3x2x4xf32>
  %dkt = "tg.matmul"(%g, %qt) {transpose_a = true} : (tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32>
  %dk = "tg.transpose"(%dkt) {perm = [0, 2, 1, 3]} : (tensor<2x2x3x4xf32>) -> tensor<2x3x2x4xf32>
  // CHECK-NOT: "tg.attention_grad"
  // CHECK: "tg.softmax_grad"
  // CHECK-NOT: "tg.attention_grad"
  func.return %dq, %dk, %dp : tensor<2x3x2x4xf32>, tensor<2x3x2x4xf32>, tensor<2x2x3x3xf32>
}

// The forward whose softmax the fused backward reads: scores, scale, softmax and the product
// with v (the heads moved by transposes) into one attention_probs, p still a result.
// CHECK-LABEL: func.func @forward
func.func @forward(%q: tensor<?x16x4x8xf32>, %k: tensor<?x16x4x8xf32>, %v: tensor<?x16x4x8xf32>, %dy: tensor<?x16x4x8xf32>) -> (tensor<?x16x4x8xf32>, tensor<?x16x4x8xf32>, tensor<?x16x4x8xf32>, tensor<?x16x4x8xf32>) {
  %c = "tg.constant"() {value = dense<0.353553385> : tensor<f32>} : () -> tensor<f32>
  %qt = "tg.transpose"(%q) {perm = [0, 2, 1, 3]} : (tensor<?x16x4x8xf32>) -> tensor<?x4x16x8xf32>
  %kt = "tg.transpose"(%k) {perm = [0, 2, 3, 1]} : (tensor<?x16x4x8xf32>) -> tensor<?x4x8x16xf32>
  %s = "tg.matmul"(%qt, %kt) : (tensor<?x4x16x8xf32>, tensor<?x4x8x16xf32>) -> tensor<?x4x16x16xf32>
  %ss = "tg.mul"(%s, %c) : (tensor<?x4x16x16xf32>, tensor<f32>) -> tensor<?x4x16x16xf32>
  %p = "tg.softmax"(%ss) {axis = 3} : (tensor<?x4x16x16xf32>) -> tensor<?x4x16x16xf32>
  %vt = "tg.transpose"(%v) {perm = [0, 2, 1, 3]} : (tensor<?x16x4x8xf32>) -> tensor<?x4x16x8xf32>
  %o = "tg.matmul"(%p, %vt) : (tensor<?x4x16x16xf32>, tensor<?x4x16x8xf32>) -> tensor<?x4x16x8xf32>
  %o4 = "tg.transpose"(%o) {perm = [0, 2, 1, 3]} : (tensor<?x4x16x8xf32>) -> tensor<?x16x4x8xf32>
  %dyt = "tg.transpose"(%dy) {perm = [0, 2, 1, 3]} : (tensor<?x16x4x8xf32>) -> tensor<?x4x16x8xf32>
  %dp = "tg.matmul"(%dyt, %vt) {transpose_b = true} : (tensor<?x4x16x8xf32>, tensor<?x4x16x8xf32>) -> tensor<?x4x16x16xf32>
  %g = "tg.softmax_grad"(%p, %dp) {axis = 3} : (tensor<?x4x16x16xf32>, tensor<?x4x16x16xf32>) -> tensor<?x4x16x16xf32>
  %ds = "tg.mul"(%c, %g) : (tensor<f32>, tensor<?x4x16x16xf32>) -> tensor<?x4x16x16xf32>
  %dvt = "tg.matmul"(%p, %dyt) {transpose_a = true} : (tensor<?x4x16x16xf32>, tensor<?x4x16x8xf32>) -> tensor<?x4x16x8xf32>
  %dv = "tg.transpose"(%dvt) {perm = [0, 2, 1, 3]} : (tensor<?x4x16x8xf32>) -> tensor<?x16x4x8xf32>
  %kk = "tg.transpose"(%k) {perm = [0, 2, 1, 3]} : (tensor<?x16x4x8xf32>) -> tensor<?x4x16x8xf32>
  %dqt = "tg.matmul"(%ds, %kk) : (tensor<?x4x16x16xf32>, tensor<?x4x16x8xf32>) -> tensor<?x4x16x8xf32>
  %dq = "tg.transpose"(%dqt) {perm = [0, 2, 1, 3]} : (tensor<?x4x16x8xf32>) -> tensor<?x16x4x8xf32>
  %dkt = "tg.matmul"(%ds, %qt) {transpose_a = true} : (tensor<?x4x16x16xf32>, tensor<?x4x16x8xf32>) -> tensor<?x4x16x8xf32>
  %dk = "tg.transpose"(%dkt) {perm = [0, 2, 1, 3]} : (tensor<?x4x16x8xf32>) -> tensor<?x16x4x8xf32>
  // CHECK: %[[F:.*]]:2 = "tg.attention_probs"(%arg0, %arg1, %arg2) {scale = 0.35355338{{[0-9]*}}{{( : f64)?}}} : (tensor<?x16x4x8xf32>, tensor<?x16x4x8xf32>, tensor<?x16x4x8xf32>) -> (tensor<?x16x4x8xf32>, tensor<?x4x16x16xf32>)
  // CHECK-NEXT: %[[G:.*]]:3 = "tg.attention_grad"(%arg0, %arg1, %arg2, %[[F]]#1, %arg3)
  // CHECK-NEXT: func.return %[[F]]#0, %[[G]]#0, %[[G]]#1, %[[G]]#2
  func.return %o4, %dq, %dk, %dv : tensor<?x16x4x8xf32>, tensor<?x16x4x8xf32>, tensor<?x16x4x8xf32>, tensor<?x16x4x8xf32>
}
