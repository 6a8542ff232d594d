// no_bef_translation
// RUN: tfrt_opt -tg-flatten-weight-grads %s | FileCheck %s

// A Dense layer's weight gradient on [batch, seq, in]: the batched x^T dy summed over the
// batch becomes one product of the flattened rows.
// CHECK-LABEL: func.func @dense_weight_grad
func.func @dense_weight_grad(%x: tensor<?x16x32xf32>, %dy: tensor<?x16x64xf32>) -> tensor<32x64xf32> {
  %p = "tg.matmul"(%x, %dy) {transpose_a = true, transpose_b = false} : (tensor<?x16x32xf32>, tensor<?x16x64xf32>) -> tensor<?x32x64xf32>
  %g = "tg.reduce_sum"(%p) {axes = [0], keepdims = false} : (tensor<?x32x64xf32>) -> tensor<32x64xf32>
  // CHECK-NOT: "tg.reduce_sum"
  // CHECK: %[[X:.*]] = "tg.reshape"(%arg0) {shape = [-1{{( : i64)?}}, 32{{( : i64)?}}]} : (tensor<?x16x32xf32>) -> tensor<?x32xf32>
  // CHECK-NEXT: %[[D:.*]] = "tg.reshape"(%arg1) {shape = [-1{{( : i64)?}}, 64{{( : i64)?}}]} : (tensor<?x16x64xf32>) -> tensor<?x64xf32>
  // CHECK-NEXT: %[[G:.*]] = "tg.matmul"(%[[X]], %[[D]]) {transpose_a = true{{.*}}} : (tensor<?x32xf32>, tensor<?x64xf32>) -> tensor<32x64xf32>
  // CHECK-NEXT: func.return %[[G]]
  func.return %g : tensor<32x64xf32>
}

// Static batch too.
// CHECK-LABEL: func.func @static_batch
func.func @static_batch(%x: tensor<4x3x2xf32>, %dy: tensor<4x3x5xf32>) -> tensor<2x5xf32> {
  %p = "tg.matmul"(%x, %dy) {transpose_a = true} : (tensor<4x3x2xf32>, tensor<4x3x5xf32>) -> tensor<4x2x5xf32>
  %g = "tg.reduce_sum"(%p) {axes = [0], keepdims = false} : (tensor<4x2x5xf32>) -> tensor<2x5xf32>
  // CHECK: "tg.matmul"(%{{.*}}, %{{.*}}) {transpose_a = true{{.*}}} : (tensor<12x2xf32>, tensor<12x5xf32>) -> tensor<2x5xf32>
  func.return %g : tensor<2x5xf32>
}

// Kept: a broadcast batch (1 against 4), a sum over another axis, a product read twice.
// CHECK-LABEL: func.func @kept
func.func @kept(%x: tensor<1x3x2xf32>, %y: tensor<4x3x2xf32>, %dy: tensor<4x3x5xf32>) -> (tensor<2x5xf32>, tensor<4x5xf32>, tensor<2x5xf32>, tensor<4x2x5xf32>) {
  %p = "tg.matmul"(%x, %dy) {transpose_a = true} : (tensor<1x3x2xf32>, tensor<4x3x5xf32>) -> tensor<4x2x5xf32>
  %g = "tg.reduce_sum"(%p) {axes = [0], keepdims = false} : (tensor<4x2x5xf32>) -> tensor<2x5xf32>
  %q = "tg.matmul"(%y, %dy) {transpose_a = true} : (tensor<4x3x2xf32>, tensor<4x3x5xf32>) -> tensor<4x2x5xf32>
  %h = "tg.reduce_sum"(%q) {axes = [1], keepdims = false} : (tensor<4x2x5xf32>) -> tensor<4x5xf32>
  %r = "tg.matmul"(%y, %dy) {transpose_a = true} : (tensor<4x3x2xf32>, tensor<4x3x5xf32>) -> tensor<4x2x5xf32>
  %k = "tg.reduce_sum"(%r) {axes = [0], keepdims = false} : (tensor<4x2x5xf32>) -> tensor<2x5xf32>
  // CHECK-COUNT-3: "tg.reduce_sum"
  // CHECK-NOT: "tg.reshape"
  func.return %g, %h, %k, %r : tensor<2x5xf32>, tensor<4x5xf32>, tensor<2x5xf32>, tensor<4x2x5xf32>
}
