// no_bef_translation
// RUN: tfrt_opt -tg-fuse-attention -tg-dce %s | FileCheck %s

// GPT-2 as torch exports it: q, k, v [B, S, H, D] transposed to heads first (k to [B, H, D, S]),
// q k^T, a scale, a causal mask added, softmax, the product with v, the transpose back.
// CHECK-LABEL: func.func @gpt2
func.func @gpt2(%q: tensor<?x?x2x4xf32>, %k: tensor<?x?x2x4xf32>, %v: tensor<?x?x2x4xf32>, %m: tensor<1x1x?x?xf32>) -> tensor<?x?x2x4xf32> {
  %qt = "tg.transpose"(%q) {perm = [0, 2, 1, 3]} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %kt = "tg.transpose"(%k) {perm = [0, 2, 3, 1]} : (tensor<?x?x2x4xf32>) -> tensor<?x2x4x?xf32>
  %vt = "tg.transpose"(%v) {perm = [0, 2, 1, 3]} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %s = "tg.matmul"(%qt, %kt) : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %c = "tg.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %t = "tg.mul"(%s, %c) : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %x = "tg.add"(%t, %m) : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = "tg.softmax"(%x) {axis = 3 : i64} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %o = "tg.matmul"(%p, %vt) : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %y = "tg.transpose"(%o) {perm = [0, 2, 1, 3]} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  // CHECK-NOT: tg.transpose
  // CHECK-NOT: tg.softmax
  // CHECK: %[[Y:.*]] = "tg.attention"(%arg0, %arg1, %arg2, %arg3) {fill = 0.000000e+00, has_mask = true, scale = 5.000000e-01, select = false} : (tensor<?x?x2x4xf32>, tensor<?x?x2x4xf32>, tensor<?x?x2x4xf32>, tensor<1x1x?x?xf32>) -> tensor<?x?x2x4xf32>
  // CHECK-NOT: tg.matmul
  // CHECK-NEXT: func.return %[[Y]]
  func.return %y : tensor<?x?x2x4xf32>
}

// BERT-style without a mask: the scale as a division, k read with transpose_b.
// CHECK-LABEL: func.func @div_scale
func.func @div_scale(%q: tensor<1x3x2x4xf32>, %k: tensor<1x5x2x4xf32>, %v: tensor<1x5x2x6xf32>) -> tensor<1x3x2x6xf32> {
  %qt = "tg.transpose"(%q) {perm = [0, 2, 1, 3]} : (tensor<1x3x2x4xf32>) -> tensor<1x2x3x4xf32>
  %kt = "tg.transpose"(%k) {perm = [0, 2, 1, 3]} : (tensor<1x5x2x4xf32>) -> tensor<1x2x5x4xf32>
  %vt = "tg.transpose"(%v) {perm = [0, 2, 1, 3]} : (tensor<1x5x2x6xf32>) -> tensor<1x2x5x6xf32>
  %s = "tg.matmul"(%qt, %kt) {transpose_b = true} : (tensor<1x2x3x4xf32>, tensor<1x2x5x4xf32>) -> tensor<1x2x3x5xf32>
  %c = "tg.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %t = "tg.div"(%s, %c) : (tensor<1x2x3x5xf32>, tensor<f32>) -> tensor<1x2x3x5xf32>
  %p = "tg.softmax"(%t) {axis = -1 : i64} : (tensor<1x2x3x5xf32>) -> tensor<1x2x3x5xf32>
  %o = "tg.matmul"(%p, %vt) : (tensor<1x2x3x5xf32>, tensor<1x2x5x6xf32>) -> tensor<1x2x3x6xf32>
  %y = "tg.transpose"(%o) {perm = [0, 2, 1, 3]} : (tensor<1x2x3x6xf32>) -> tensor<1x3x2x6xf32>
  // CHECK: %[[Y:.*]] = "tg.attention"(%arg0, %arg1, %arg2) {fill = 0.000000e+00, has_mask = false, scale = 5.000000e-01, select = false} : (tensor<1x3x2x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x6xf32>) -> tensor<1x3x2x6xf32>
  // CHECK-NEXT: func.return %[[Y]]
  func.return %y : tensor<1x3x2x6xf32>
}

// Not fused: the scores have a second user; softmax over another axis.
// CHECK-LABEL: func.func @blocked
func.func @blocked(%q: tensor<1x3x2x4xf32>, %k: tensor<1x3x2x4xf32>) -> (tensor<1x3x2x3xf32>, tensor<1x2x3x3xf32>, tensor<1x3x2x3xf32>) {
  %qt = "tg.transpose"(%q) {perm = [0, 2, 1, 3]} : (tensor<1x3x2x4xf32>) -> tensor<1x2x3x4xf32>
  %kt = "tg.transpose"(%k) {perm = [0, 2, 3, 1]} : (tensor<1x3x2x4xf32>) -> tensor<1x2x4x3xf32>
  %s = "tg.matmul"(%qt, %kt) : (tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>) -> tensor<1x2x3x3xf32>
  %p = "tg.softmax"(%s) {axis = 3 : i64} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %o = "tg.matmul"(%p, %s) : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %y = "tg.transpose"(%o) {perm = [0, 2, 1, 3]} : (tensor<1x2x3x3xf32>) -> tensor<1x3x2x3xf32>
  %s2 = "tg.matmul"(%qt, %kt) : (tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>) -> tensor<1x2x3x3xf32>
  %p2 = "tg.softmax"(%s2) {axis = 2 : i64} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %vt = "tg.transpose"(%q) {perm = [0, 2, 1, 3]} : (tensor<1x3x2x4xf32>) -> tensor<1x2x3x4xf32>
  %o2 = "tg.matmul"(%p2, %s2) : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %y2 = "tg.transpose"(%o2) {perm = [0, 2, 1, 3]} : (tensor<1x2x3x3xf32>) -> tensor<1x3x2x3xf32>
  // CHECK-NOT: tg.attention
  // CHECK: "tg.softmax"
  // CHECK: "tg.softmax"
  // CHECK-NOT: tg.attention
  func.return %y, %s, %y2 : tensor<1x3x2x3xf32>, tensor<1x2x3x3xf32>, tensor<1x3x2x3xf32>
}

// Keras' masked softmax: the scores where a boolean mask (broadcast to the scores' shape by a
// fill of true and a logical_and) is true, a large negative constant elsewhere. The scores'
// shape is rebuilt from q's and k's, so the scores themselves go.
// CHECK-LABEL: func.func @keras_select
func.func @keras_select(%q: tensor<?x?x2x4xf32>, %k: tensor<?x?x2x4xf32>, %v: tensor<?x?x2x4xf32>, %m: tensor<?x1x?x?xi1>) -> tensor<?x?x2x4xf32> {
  %qt = "tg.transpose"(%q) {perm = [0, 2, 1, 3]} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %kt = "tg.transpose"(%k) {perm = [0, 2, 3, 1]} : (tensor<?x?x2x4xf32>) -> tensor<?x2x4x?xf32>
  %vt = "tg.transpose"(%v) {perm = [0, 2, 1, 3]} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %s = "tg.matmul"(%qt, %kt) : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %c = "tg.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %t = "tg.mul"(%s, %c) : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %true = "tg.constant"() {value = dense<true> : tensor<i1>} : () -> tensor<i1>
  %shape = "tg.shape"(%t) {out_type = "i32"} : (tensor<?x2x?x?xf32>) -> tensor<4xi32>
  %shape64 = "tg.cast"(%shape) {to = "i64"} : (tensor<4xi32>) -> tensor<4xi64>
  %ones = "tg.fill"(%shape64, %true) : (tensor<4xi64>, tensor<i1>) -> tensor<?x?x?x?xi1>
  %cond = "tg.logical_and"(%ones, %m) : (tensor<?x?x?x?xi1>, tensor<?x1x?x?xi1>) -> tensor<?x?x?x?xi1>
  %big = "tg.constant"() {value = dense<-2.0e38> : tensor<f32>} : () -> tensor<f32>
  %x = "tg.select"(%cond, %t, %big) : (tensor<?x?x?x?xi1>, tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %p = "tg.softmax"(%x) {axis = 3 : i64} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %o = "tg.matmul"(%p, %vt) : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %y = "tg.transpose"(%o) {perm = [0, 2, 1, 3]} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  // CHECK-NOT: tg.transpose
  // CHECK-NOT: tg.matmul
  // CHECK-DAG: %[[SQ:.*]] = "tg.shape"(%arg0) {out_type = "i32"}
  // CHECK-DAG: %[[SK:.*]] = "tg.shape"(%arg1) {out_type = "i32"}
  // CHECK-DAG: %[[B:.*]] = "tg.slice"(%[[SQ]]) {axes = [0], ends = [1], starts = [0], steps = [1]}
  // CHECK-DAG: %[[H:.*]] = "tg.slice"(%[[SQ]]) {axes = [0], ends = [3], starts = [2], steps = [1]}
  // CHECK-DAG: %[[Q:.*]] = "tg.slice"(%[[SQ]]) {axes = [0], ends = [2], starts = [1], steps = [1]}
  // CHECK-DAG: %[[K:.*]] = "tg.slice"(%[[SK]]) {axes = [0], ends = [2], starts = [1], steps = [1]}
  // CHECK: %[[SHAPE:.*]] = "tg.concat"(%[[B]], %[[H]], %[[Q]], %[[K]]) {axis = 0}
  // CHECK: %[[C64:.*]] = "tg.cast"(%[[SHAPE]])
  // CHECK: %[[ONES:.*]] = "tg.fill"(%[[C64]]
  // CHECK: %[[COND:.*]] = "tg.logical_and"(%[[ONES]], %arg3)
  // CHECK: %[[Y:.*]] = "tg.attention"(%arg0, %arg1, %arg2, %[[COND]]) {fill = -1.99999{{[0-9]+}}e+38, has_mask = true, scale = 5.000000e-01, select = true}
  // CHECK-NOT: tg.softmax
  // CHECK-NOT: tg.select
  // CHECK-NEXT: func.return %[[Y]]
  func.return %y : tensor<?x?x2x4xf32>
}
