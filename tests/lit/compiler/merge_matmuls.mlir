// no_bef_translation
// RUN: tfrt_opt -tg-merge-matmuls %s | FileCheck %s

// BERT's projections: three matmuls of one x with biases, reshaped into heads for attention,
// become one matmul over the packed [8, 24] weight, one bias add and three column views.
// CHECK-LABEL: func.func @bert
func.func @bert(%x: tensor<?x?x8xf32>, %m: tensor<?x1x1x?xf32>) -> tensor<?x?x2x4xf32> {
  %wq = "tg.constant"() {value = dense<1.0> : tensor<8x8xf32>} : () -> tensor<8x8xf32>
  %wk = "tg.constant"() {value = dense<2.0> : tensor<8x8xf32>} : () -> tensor<8x8xf32>
  %wv = "tg.constant"() {value = dense<3.0> : tensor<8x8xf32>} : () -> tensor<8x8xf32>
  %b = "tg.constant"() {value = dense<0.5> : tensor<8xf32>} : () -> tensor<8xf32>
  %q = "tg.matmul"(%x, %wq) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %qb = "tg.add"(%b, %q) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %qr = "tg.reshape"(%qb) {shape = [0, 0, 2, 4], copy_zero = true} : (tensor<?x?x8xf32>) -> tensor<?x?x2x4xf32>
  %k = "tg.matmul"(%x, %wk) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %kb = "tg.add"(%k, %b) : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %kr = "tg.reshape"(%kb) {shape = [0, 0, 2, 4], copy_zero = true} : (tensor<?x?x8xf32>) -> tensor<?x?x2x4xf32>
  %v = "tg.matmul"(%x, %wv) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %vb = "tg.add"(%b, %v) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %vr = "tg.reshape"(%vb) {shape = [0, 0, 2, 4], copy_zero = true} : (tensor<?x?x8xf32>) -> tensor<?x?x2x4xf32>
  // CHECK: %[[W:.*]] = "tg.constant"() {{.*}} -> tensor<8x24xf32>
  // CHECK-NEXT: %[[P:.*]] = "tg.matmul"(%arg0, %[[W]]) {{.*}} -> tensor<?x?x24xf32>
  // CHECK-NEXT: %[[B:.*]] = "tg.constant"() {{.*}} -> tensor<24xf32>
  // CHECK-NEXT: %[[Z:.*]] = "tg.add"(%[[P]], %[[B]]) : (tensor<?x?x24xf32>, tensor<24xf32>) -> tensor<?x?x24xf32>
  // CHECK-NEXT: %[[Q:.*]] = "tg.columns"(%[[Z]]) {size = 8, start = 0} : (tensor<?x?x24xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[K:.*]] = "tg.columns"(%[[Z]]) {size = 8, start = 8}
  // CHECK-NEXT: %[[V:.*]] = "tg.columns"(%[[Z]]) {size = 8, start = 16}
  // CHECK-NOT: tg.matmul
  // CHECK: "tg.reshape"(%[[Q]])
  // CHECK: "tg.reshape"(%[[K]])
  // CHECK: "tg.reshape"(%[[V]])
  %y = "tg.attention"(%qr, %kr, %vr, %m) {has_mask = true, scale = 0.5} : (tensor<?x?x2x4xf32>, tensor<?x?x2x4xf32>, tensor<?x?x2x4xf32>, tensor<?x1x1x?xf32>) -> tensor<?x?x2x4xf32>
  func.return %y : tensor<?x?x2x4xf32>
}

// Not merged: the value projection is also returned (a view must not leave the attention), so
// only the query and key projections (without biases) are packed; a transposed weight stays.
// CHECK-LABEL: func.func @partial
func.func @partial(%x: tensor<1x3x8xf32>) -> (tensor<1x3x2x4xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>) {
  %wq = "tg.constant"() {value = dense<1.0> : tensor<8x8xf32>} : () -> tensor<8x8xf32>
  %wk = "tg.constant"() {value = dense<2.0> : tensor<8x8xf32>} : () -> tensor<8x8xf32>
  %wv = "tg.constant"() {value = dense<3.0> : tensor<8x8xf32>} : () -> tensor<8x8xf32>
  %wt = "tg.constant"() {value = dense<4.0> : tensor<8x8xf32>} : () -> tensor<8x8xf32>
  %q = "tg.matmul"(%x, %wq) : (tensor<1x3x8xf32>, tensor<8x8xf32>) -> tensor<1x3x8xf32>
  %qr = "tg.reshape"(%q) {shape = [1, 3, 2, 4]} : (tensor<1x3x8xf32>) -> tensor<1x3x2x4xf32>
  %k = "tg.matmul"(%x, %wk) : (tensor<1x3x8xf32>, tensor<8x8xf32>) -> tensor<1x3x8xf32>
  %kr = "tg.reshape"(%k) {shape = [1, 3, 2, 4]} : (tensor<1x3x8xf32>) -> tensor<1x3x2x4xf32>
  %v = "tg.matmul"(%x, %wv) : (tensor<1x3x8xf32>, tensor<8x8xf32>) -> tensor<1x3x8xf32>
  %vr = "tg.reshape"(%v) {shape = [1, 3, 2, 4]} : (tensor<1x3x8xf32>) -> tensor<1x3x2x4xf32>
  %t = "tg.matmul"(%x, %wt) {transpose_b = true} : (tensor<1x3x8xf32>, tensor<8x8xf32>) -> tensor<1x3x8xf32>
  // CHECK: "tg.matmul"(%arg0, %{{.*}}) {{.*}} -> tensor<1x3x16xf32>
  // CHECK: "tg.columns"({{.*}}) {size = 8, start = 0}
  // CHECK: "tg.columns"({{.*}}) {size = 8, start = 8}
  // CHECK-NOT: tg.columns
  // CHECK: "tg.matmul"(%arg0, %{{.*}}) {{.*}} -> tensor<1x3x8xf32>
  // CHECK: "tg.matmul"(%arg0, %{{.*}}) {{.*}}transpose_b = true{{.*}} -> tensor<1x3x8xf32>
  %y = "tg.attention"(%qr, %kr, %vr) {scale = 0.5} : (tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>) -> tensor<1x3x2x4xf32>
  func.return %y, %v, %t : tensor<1x3x2x4xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>
}

// GPT-2's packed projection split along the last axis into q, k, v for attention: the pieces
// become column views of the packed value (no copies).
// CHECK-LABEL: func.func @gpt2_split
func.func @gpt2_split(%z: tensor<?x?x?xf32>) -> tensor<?x?x2x4xf32> {
  %p:3 = "tg.split"(%z) {axis = 2, sizes = [8, 8, 8]} : (tensor<?x?x?xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  %qr = "tg.reshape"(%p#0) {shape = [0, 0, 2, 4], copy_zero = true} : (tensor<?x?x8xf32>) -> tensor<?x?x2x4xf32>
  %kr = "tg.reshape"(%p#1) {shape = [0, 0, 2, 4], copy_zero = true} : (tensor<?x?x8xf32>) -> tensor<?x?x2x4xf32>
  %vr = "tg.reshape"(%p#2) {shape = [0, 0, 2, 4], copy_zero = true} : (tensor<?x?x8xf32>) -> tensor<?x?x2x4xf32>
  // CHECK-NOT: tg.split
  // CHECK: %[[Q:.*]] = "tg.columns"(%arg0) {size = 8, start = 0} : (tensor<?x?x?xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[K:.*]] = "tg.columns"(%arg0) {size = 8, start = 8}
  // CHECK-NEXT: %[[V:.*]] = "tg.columns"(%arg0) {size = 8, start = 16}
  // CHECK: "tg.reshape"(%[[Q]])
  %y = "tg.attention"(%qr, %kr, %vr) {scale = 0.5} : (tensor<?x?x2x4xf32>, tensor<?x?x2x4xf32>, tensor<?x?x2x4xf32>) -> tensor<?x?x2x4xf32>
  func.return %y : tensor<?x?x2x4xf32>
}

// Not rewritten: a piece is also returned.
// CHECK-LABEL: func.func @split_kept
func.func @split_kept(%z: tensor<1x3x16xf32>) -> (tensor<1x3x2x4xf32>, tensor<1x3x8xf32>) {
  %p:2 = "tg.split"(%z) {axis = 2, sizes = [8, 8]} : (tensor<1x3x16xf32>) -> (tensor<1x3x8xf32>, tensor<1x3x8xf32>)
  %qr = "tg.reshape"(%p#0) {shape = [1, 3, 2, 4]} : (tensor<1x3x8xf32>) -> tensor<1x3x2x4xf32>
  // CHECK: tg.split
  // CHECK-NOT: tg.columns
  %y = "tg.attention"(%qr, %qr, %qr) {scale = 0.5} : (tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>) -> tensor<1x3x2x4xf32>
  func.return %y, %p#1 : tensor<1x3x2x4xf32>, tensor<1x3x8xf32>
}

// Keras' MultiHeadAttention (TF einsum projections): [1, 8, 8] weights, the bias added after
// the split into heads. The weights lose their unit batch axis, the biases move before the
// reshape (flattened to [8]), then the three projections merge as above; the output
// projection's [1, 8, 8] weight becomes [8, 8] too.
// CHECK-LABEL: func.func @keras
func.func @keras(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %wq = "tg.constant"() {value = dense<1.0> : tensor<1x8x8xf32>} : () -> tensor<1x8x8xf32>
  %wk = "tg.constant"() {value = dense<2.0> : tensor<1x8x8xf32>} : () -> tensor<1x8x8xf32>
  %wv = "tg.constant"() {value = dense<3.0> : tensor<1x8x8xf32>} : () -> tensor<1x8x8xf32>
  %wo = "tg.constant"() {value = dense<4.0> : tensor<1x8x8xf32>} : () -> tensor<1x8x8xf32>
  %b = "tg.constant"() {value = dense<0.5> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %q = "tg.matmul"(%x, %wq) : (tensor<?x?x8xf32>, tensor<1x8x8xf32>) -> tensor<?x?x8xf32>
  %qr = "tg.reshape"(%q) {shape = [0, 0, 2, 4], copy_zero = true} : (tensor<?x?x8xf32>) -> tensor<?x?x2x4xf32>
  %qb = "tg.add"(%qr, %b) : (tensor<?x?x2x4xf32>, tensor<2x4xf32>) -> tensor<?x?x2x4xf32>
  %k = "tg.matmul"(%x, %wk) : (tensor<?x?x8xf32>, tensor<1x8x8xf32>) -> tensor<?x?x8xf32>
  %kr = "tg.reshape"(%k) {shape = [0, 0, 2, 4], copy_zero = true} : (tensor<?x?x8xf32>) -> tensor<?x?x2x4xf32>
  %kb = "tg.add"(%b, %kr) : (tensor<2x4xf32>, tensor<?x?x2x4xf32>) -> tensor<?x?x2x4xf32>
  %v = "tg.matmul"(%x, %wv) : (tensor<?x?x8xf32>, tensor<1x8x8xf32>) -> tensor<?x?x8xf32>
  %vr = "tg.reshape"(%v) {shape = [0, 0, 2, 4], copy_zero = true} : (tensor<?x?x8xf32>) -> tensor<?x?x2x4xf32>
  %vb = "tg.add"(%vr, %b) : (tensor<?x?x2x4xf32>, tensor<2x4xf32>) -> tensor<?x?x2x4xf32>
  // CHECK: %[[W:.*]] = "tg.constant"() {{.*}} -> tensor<8x24xf32>
  // CHECK-NEXT: %[[P:.*]] = "tg.matmul"(%arg0, %[[W]]) {{.*}} -> tensor<?x?x24xf32>
  // CHECK-NEXT: %[[B:.*]] = "tg.constant"() {value = dense<5.000000e-01> : tensor<24xf32>}
  // CHECK-NEXT: %[[Z:.*]] = "tg.add"(%[[P]], %[[B]]) : (tensor<?x?x24xf32>, tensor<24xf32>) -> tensor<?x?x24xf32>
  // CHECK-NEXT: "tg.columns"(%[[Z]]) {size = 8, start = 0}
  // CHECK-NEXT: "tg.columns"(%[[Z]]) {size = 8, start = 8}
  // CHECK-NEXT: "tg.columns"(%[[Z]]) {size = 8, start = 16}
  // CHECK-NOT: tensor<1x8x8xf32>
  // CHECK: "tg.attention"
  // CHECK: %[[WO:.*]] = "tg.constant"() {value = dense<4.000000e+00> : tensor<8x8xf32>}
  // CHECK: "tg.matmul"(%{{.*}}, %[[WO]]) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %y = "tg.attention"(%qb, %kb, %vb) {scale = 0.5} : (tensor<?x?x2x4xf32>, tensor<?x?x2x4xf32>, tensor<?x?x2x4xf32>) -> tensor<?x?x2x4xf32>
  %f = "tg.reshape"(%y) {shape = [0, 0, 8], copy_zero = true} : (tensor<?x?x2x4xf32>) -> tensor<?x?x8xf32>
  %o = "tg.matmul"(%f, %wo) : (tensor<?x?x8xf32>, tensor<1x8x8xf32>) -> tensor<?x?x8xf32>
  func.return %o : tensor<?x?x8xf32>
}

// Left alone: a bias that also varies along a kept axis ([3, 2, 4] over [?, 3, 2, 4]) and a
// unit-batch weight of a rank-2 input (the product's result would lose its batch axis).
// CHECK-LABEL: func.func @not_keras
func.func @not_keras(%x: tensor<?x3x8xf32>, %x2: tensor<3x8xf32>) -> (tensor<?x3x2x4xf32>, tensor<1x3x8xf32>) {
  %w = "tg.constant"() {value = dense<1.0> : tensor<1x8x8xf32>} : () -> tensor<1x8x8xf32>
  %b = "tg.constant"() {value = dense<0.5> : tensor<3x2x4xf32>} : () -> tensor<3x2x4xf32>
  %q = "tg.matmul"(%x, %w) : (tensor<?x3x8xf32>, tensor<1x8x8xf32>) -> tensor<?x3x8xf32>
  %qr = "tg.reshape"(%q) {shape = [0, 0, 2, 4], copy_zero = true} : (tensor<?x3x8xf32>) -> tensor<?x3x2x4xf32>
  // CHECK: %[[R:.*]] = "tg.reshape"
  // CHECK-NEXT: "tg.add"(%[[R]], %{{.*}}) : (tensor<?x3x2x4xf32>, tensor<3x2x4xf32>)
  %qb = "tg.add"(%qr, %b) : (tensor<?x3x2x4xf32>, tensor<3x2x4xf32>) -> tensor<?x3x2x4xf32>
  // CHECK: "tg.matmul"(%arg1, %{{.*}}) : (tensor<3x8xf32>, tensor<1x8x8xf32>) -> tensor<1x3x8xf32>
  %z = "tg.matmul"(%x2, %w) : (tensor<3x8xf32>, tensor<1x8x8xf32>) -> tensor<1x3x8xf32>
  func.return %qb, %z : tensor<?x3x2x4xf32>, tensor<1x3x8xf32>
}
