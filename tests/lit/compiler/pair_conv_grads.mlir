// no_bef_translation
// RUN: tfrt_opt -tg-pair-conv-grads %s | FileCheck %s

// A convolution's two gradients read the same dy: one conv2d_grads op, where the first of
// them stood (x, w and dy are defined before it).
// CHECK-LABEL: func.func @pair
func.func @pair(%x: tensor<2x8x8x4xf32>, %w: tensor<3x3x4x6xf32>, %dy: tensor<2x8x8x6xf32>) -> (tensor<2x8x8x4xf32>, tensor<3x3x4x6xf32>) {
  %xs = "tg.constant"() {value = dense<[2, 8, 8, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %ws = "tg.constant"() {value = dense<[3, 3, 4, 6]> : tensor<4xi64>} : () -> tensor<4xi64>
  // CHECK: %[[G:.*]]:2 = "tg.conv2d_grads"(%arg0, %arg1, %arg2) {dilations = [1{{( : i64)?}}, 1{{( : i64)?}}], groups = 1{{( : i64)?}}, layout = "NHWC", pads = [1{{( : i64)?}}, 1{{( : i64)?}}, 1{{( : i64)?}}, 1{{( : i64)?}}], strides = [1{{( : i64)?}}, 1{{( : i64)?}}]} : (tensor<2x8x8x4xf32>, tensor<3x3x4x6xf32>, tensor<2x8x8x6xf32>) -> (tensor<2x8x8x4xf32>, tensor<3x3x4x6xf32>)
  // CHECK-NOT: conv2d_backprop
  // CHECK: func.return %[[G]]#0, %[[G]]#1
  %dx = "tg.conv2d_backprop_input"(%xs, %w, %dy) {layout = "NHWC", strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1} : (tensor<4xi64>, tensor<3x3x4x6xf32>, tensor<2x8x8x6xf32>) -> tensor<2x8x8x4xf32>
  %dw = "tg.conv2d_backprop_filter"(%x, %ws, %dy) {layout = "NHWC", strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1} : (tensor<2x8x8x4xf32>, tensor<4xi64>, tensor<2x8x8x6xf32>) -> tensor<3x3x4x6xf32>
  func.return %dx, %dw : tensor<2x8x8x4xf32>, tensor<3x3x4x6xf32>
}

// A dynamic batch: the input gradient's shape operand is shape(x) (through a cast, as TF's
// gradient writes it), so dx has x's shape.  Another tensor's shape is not x's: kept.
// CHECK-LABEL: func.func @dynamic
func.func @dynamic(%x: tensor<?x8x8x4xf32>, %w: tensor<3x3x4x6xf32>, %dy: tensor<?x8x8x6xf32>, %z: tensor<?x8x8x4xf32>, %z6: tensor<?x8x8x6xf32>) -> (tensor<?x8x8x4xf32>, tensor<3x3x4x6xf32>, tensor<?x8x8x4xf32>, tensor<3x3x4x6xf32>) {
  %s = "tg.shape"(%x) {out_type = "i32"} : (tensor<?x8x8x4xf32>) -> tensor<4xi32>
  %xs = "tg.cast"(%s) {to = "i64"} : (tensor<4xi32>) -> tensor<4xi64>
  %zs = "tg.shape"(%z) {out_type = "i64"} : (tensor<?x8x8x4xf32>) -> tensor<4xi64>
  %ws = "tg.constant"() {value = dense<[3, 3, 4, 6]> : tensor<4xi64>} : () -> tensor<4xi64>
  // CHECK: %[[G:.*]]:2 = "tg.conv2d_grads"(%arg0, %arg1, %arg2) {{.*}} : (tensor<?x8x8x4xf32>, tensor<3x3x4x6xf32>, tensor<?x8x8x6xf32>) -> (tensor<?x8x8x4xf32>, tensor<3x3x4x6xf32>)
  // CHECK: "tg.conv2d_backprop_input"(%{{.*}}, %arg1, %arg4)
  // CHECK: "tg.conv2d_backprop_filter"(%arg0, %{{.*}}, %arg4)
  // CHECK: func.return %[[G]]#0, %[[G]]#1
  %dx = "tg.conv2d_backprop_input"(%xs, %w, %dy) {layout = "NHWC", strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1} : (tensor<4xi64>, tensor<3x3x4x6xf32>, tensor<?x8x8x6xf32>) -> tensor<?x8x8x4xf32>
  %dw = "tg.conv2d_backprop_filter"(%x, %ws, %dy) {layout = "NHWC", strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1} : (tensor<?x8x8x4xf32>, tensor<4xi64>, tensor<?x8x8x6xf32>) -> tensor<3x3x4x6xf32>
  %dz = "tg.conv2d_backprop_input"(%zs, %w, %z6) {layout = "NHWC", strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1} : (tensor<4xi64>, tensor<3x3x4x6xf32>, tensor<?x8x8x6xf32>) -> tensor<?x8x8x4xf32>
  %dw2 = "tg.conv2d_backprop_filter"(%x, %ws, %z6) {layout = "NHWC", strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1} : (tensor<?x8x8x4xf32>, tensor<4xi64>, tensor<?x8x8x6xf32>) -> tensor<3x3x4x6xf32>
  func.return %dx, %dw, %dz, %dw2 : tensor<?x8x8x4xf32>, tensor<3x3x4x6xf32>, tensor<?x8x8x4xf32>, tensor<3x3x4x6xf32>
}

// The filter gradient comes first and the filter the input gradient reads is made between
// the two: the pair goes where the second stood, as nothing in between reads the first's
// result.  With a reader in between, the two stay apart.
// CHECK-LABEL: func.func @second_site
func.func @second_site(%x: tensor<1x4x4x2xf32>, %w: tensor<1x1x2x2xf32>, %dy: tensor<1x4x4x2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x1x2x2xf32>) {
  %xs = "tg.constant"() {value = dense<[1, 4, 4, 2]> : tensor<4xi64>} : () -> tensor<4xi64>
  %ws = "tg.constant"() {value = dense<[1, 1, 2, 2]> : tensor<4xi64>} : () -> tensor<4xi64>
  // CHECK: %[[N:.*]] = "tg.neg"(%arg1)
  // CHECK-NEXT: %[[G:.*]]:2 = "tg.conv2d_grads"(%arg0, %[[N]], %arg2)
  // CHECK-NEXT: func.return %[[G]]#0, %[[G]]#1
  %dw = "tg.conv2d_backprop_filter"(%x, %ws, %dy) {layout = "NHWC", strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], groups = 1} : (tensor<1x4x4x2xf32>, tensor<4xi64>, tensor<1x4x4x2xf32>) -> tensor<1x1x2x2xf32>
  %w2 = "tg.neg"(%w) : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %dx = "tg.conv2d_backprop_input"(%xs, %w2, %dy) {layout = "NHWC", strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], groups = 1} : (tensor<4xi64>, tensor<1x1x2x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  func.return %dx, %dw : tensor<1x4x4x2xf32>, tensor<1x1x2x2xf32>
}

// CHECK-LABEL: func.func @blocked
func.func @blocked(%x: tensor<1x4x4x2xf32>, %w: tensor<1x1x2x2xf32>, %dy: tensor<1x4x4x2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x1x2x2xf32>) {
  %xs = "tg.constant"() {value = dense<[1, 4, 4, 2]> : tensor<4xi64>} : () -> tensor<4xi64>
  %ws = "tg.constant"() {value = dense<[1, 1, 2, 2]> : tensor<4xi64>} : () -> tensor<4xi64>
  // CHECK-NOT: conv2d_grads
  // CHECK: "tg.conv2d_backprop_filter"
  // CHECK: "tg.conv2d_backprop_input"
  %dw = "tg.conv2d_backprop_filter"(%x, %ws, %dy) {layout = "NHWC", strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], groups = 1} : (tensor<1x4x4x2xf32>, tensor<4xi64>, tensor<1x4x4x2xf32>) -> tensor<1x1x2x2xf32>
  %w2 = "tg.add"(%w, %dw) : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %dx = "tg.conv2d_backprop_input"(%xs, %w2, %dy) {layout = "NHWC", strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], groups = 1} : (tensor<4xi64>, tensor<1x1x2x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  func.return %dx, %dw : tensor<1x4x4x2xf32>, tensor<1x1x2x2xf32>
}

// Kept apart: other strides, another dy, a dynamic batch.
// CHECK-LABEL: func.func @kept
func.func @kept(%x: tensor<2x8x8x4xf32>, %w: tensor<1x1x4x6xf32>, %dy: tensor<2x8x8x6xf32>, %dy2: tensor<2x8x8x6xf32>, %xd: tensor<?x8x8x4xf32>, %dyd: tensor<?x8x8x6xf32>, %xsd: tensor<4xi64>) -> (tensor<2x8x8x4xf32>, tensor<1x1x4x6xf32>, tensor<2x8x8x4xf32>, tensor<1x1x4x6xf32>, tensor<?x8x8x4xf32>, tensor<1x1x4x6xf32>) {
  %xs = "tg.constant"() {value = dense<[2, 8, 8, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %ws = "tg.constant"() {value = dense<[1, 1, 4, 6]> : tensor<4xi64>} : () -> tensor<4xi64>
  // CHECK-NOT: conv2d_grads
  %a = "tg.conv2d_backprop_input"(%xs, %w, %dy) {layout = "NHWC", strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], groups = 1} : (tensor<4xi64>, tensor<1x1x4x6xf32>, tensor<2x8x8x6xf32>) -> tensor<2x8x8x4xf32>
  %b = "tg.conv2d_backprop_filter"(%x, %ws, %dy) {layout = "NHWC", strides = [2, 2], pads = [0, 0, 0, 0], dilations = [1, 1], groups = 1} : (tensor<2x8x8x4xf32>, tensor<4xi64>, tensor<2x8x8x6xf32>) -> tensor<1x1x4x6xf32>
  %c = "tg.conv2d_backprop_input"(%xs, %w, %dy2) {layout = "NHWC", strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], groups = 1} : (tensor<4xi64>, tensor<1x1x4x6xf32>, tensor<2x8x8x6xf32>) -> tensor<2x8x8x4xf32>
  %d = "tg.conv2d_backprop_filter"(%x, %ws, %dy) {layout = "NHWC", strides = [2, 2], pads = [0, 0, 0, 0], dilations = [1, 1], groups = 1} : (tensor<2x8x8x4xf32>, tensor<4xi64>, tensor<2x8x8x6xf32>) -> tensor<1x1x4x6xf32>
  %e = "tg.conv2d_backprop_input"(%xsd, %w, %dyd) {layout = "NHWC", strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], groups = 1} : (tensor<4xi64>, tensor<1x1x4x6xf32>, tensor<?x8x8x6xf32>) -> tensor<?x8x8x4xf32>
  %f = "tg.conv2d_backprop_filter"(%xd, %ws, %dyd) {layout = "NHWC", strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], groups = 1} : (tensor<?x8x8x4xf32>, tensor<4xi64>, tensor<?x8x8x6xf32>) -> tensor<1x1x4x6xf32>
  func.return %a, %b, %c, %d, %e, %f : tensor<2x8x8x4xf32>, tensor<1x1x4x6xf32>, tensor<2x8x8x4xf32>, tensor<1x1x4x6xf32>, tensor<?x8x8x4xf32>, tensor<1x1x4x6xf32>
}

// A bias added to the convolution's output: its gradient (the NHWC bias_add_grad of the
// same dy) joins the pair, where the pair stands.  Read before the pair, it stays apart.
// CHECK-LABEL: func.func @bias
func.func @bias(%x: tensor<?x8x8x4xf32>, %w: tensor<3x3x4x6xf32>, %dy: tensor<?x8x8x6xf32>, %dy2: tensor<?x8x8x6xf32>) -> (tensor<?x8x8x4xf32>, tensor<3x3x4x6xf32>, tensor<6xf32>, tensor<?x8x8x4xf32>, tensor<3x3x4x6xf32>, tensor<6xf32>) {
  %s = "tg.shape"(%x) {out_type = "i64"} : (tensor<?x8x8x4xf32>) -> tensor<4xi64>
  %ws = "tg.constant"() {value = dense<[3, 3, 4, 6]> : tensor<4xi64>} : () -> tensor<4xi64>
  // CHECK: %[[G:.*]]:3 = "tg.conv2d_bias_grads"(%arg0, %arg1, %arg2) {dilations = [1{{( : i64)?}}, 1{{( : i64)?}}], groups = 1{{( : i64)?}}, layout = "NHWC", pads = [1{{( : i64)?}}, 1{{( : i64)?}}, 1{{( : i64)?}}, 1{{( : i64)?}}], strides = [1{{( : i64)?}}, 1{{( : i64)?}}]} : (tensor<?x8x8x4xf32>, tensor<3x3x4x6xf32>, tensor<?x8x8x6xf32>) -> (tensor<?x8x8x4xf32>, tensor<3x3x4x6xf32>, tensor<6xf32>)
  // CHECK: %[[B:.*]] = "tg.bias_add_grad"(%arg3)
  // CHECK-NEXT: %[[N:.*]] = "tg.neg"(%[[B]])
  // CHECK-NEXT: %[[H:.*]]:2 = "tg.conv2d_grads"(%arg0, %arg1, %arg3)
  // CHECK: func.return %[[G]]#0, %[[G]]#1, %[[G]]#2, %[[H]]#0, %[[H]]#1, %[[N]]
  %dx = "tg.conv2d_backprop_input"(%s, %w, %dy) {layout = "NHWC", strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1} : (tensor<4xi64>, tensor<3x3x4x6xf32>, tensor<?x8x8x6xf32>) -> tensor<?x8x8x4xf32>
  %dw = "tg.conv2d_backprop_filter"(%x, %ws, %dy) {layout = "NHWC", strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1} : (tensor<?x8x8x4xf32>, tensor<4xi64>, tensor<?x8x8x6xf32>) -> tensor<3x3x4x6xf32>
  %db = "tg.bias_add_grad"(%dy) {layout = "NHWC"} : (tensor<?x8x8x6xf32>) -> tensor<6xf32>
  %db2 = "tg.bias_add_grad"(%dy2) {layout = "NHWC"} : (tensor<?x8x8x6xf32>) -> tensor<6xf32>
  %n = "tg.neg"(%db2) : (tensor<6xf32>) -> tensor<6xf32>
  %dx2 = "tg.conv2d_backprop_input"(%s, %w, %dy2) {layout = "NHWC", strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1} : (tensor<4xi64>, tensor<3x3x4x6xf32>, tensor<?x8x8x6xf32>) -> tensor<?x8x8x4xf32>
  %dw2 = "tg.conv2d_backprop_filter"(%x, %ws, %dy2) {layout = "NHWC", strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1} : (tensor<?x8x8x4xf32>, tensor<4xi64>, tensor<?x8x8x6xf32>) -> tensor<3x3x4x6xf32>
  func.return %dx, %dw, %db, %dx2, %dw2, %n : tensor<?x8x8x4xf32>, tensor<3x3x4x6xf32>, tensor<6xf32>, tensor<?x8x8x4xf32>, tensor<3x3x4x6xf32>, tensor<6xf32>
}
