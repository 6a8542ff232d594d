// no_bef_translation
// RUN: tfrt_opt -tg-fold-pad %s | FileCheck %s

// Keras' stem: ZeroPadding2D((3, 3)) then a VALID 7x7/2 conv: the pad becomes the conv's pads.
// CHECK-LABEL: func.func @stem
func.func @stem(%x: tensor<1x8x8x3xf32>) -> tensor<1x4x4x2xf32> {
  %w = "tg.constant"() {value = dense<1.0> : tensor<7x7x3x2xf32>} : () -> tensor<7x7x3x2xf32>
  %p = "tg.pad"(%x) {pads = [0, 3, 3, 0, 0, 3, 3, 0]} : (tensor<1x8x8x3xf32>) -> tensor<1x14x14x3xf32>
  %y = "tg.conv2d"(%p, %w) {layout = "NHWC", strides = [2, 2], pads = [0, 0, 0, 0]} : (tensor<1x14x14x3xf32>, tensor<7x7x3x2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK-NOT: "tg.pad"
  // CHECK: %[[C:.*]] = "tg.conv2d"(%arg0, %{{.*}}) {{{.*}}pads = [3{{( : i64)?}}, 3{{( : i64)?}}, 3{{( : i64)?}}, 3{{( : i64)?}}]{{.*}}strides = [2{{( : i64)?}}, 2{{( : i64)?}}]{{.*}} : (tensor<1x8x8x3xf32>, tensor<7x7x3x2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK-NEXT: func.return %[[C]]
  func.return %y : tensor<1x4x4x2xf32>
}

// NCHW, asymmetric pads added to the conv's own pads.
// CHECK-LABEL: func.func @nchw
func.func @nchw(%x: tensor<1x2x5x5xf32>) -> tensor<1x2x7x5xf32> {
  %w = "tg.constant"() {value = dense<1.0> : tensor<2x2x3x3xf32>} : () -> tensor<2x2x3x3xf32>
  %p = "tg.pad"(%x) {pads = [0, 0, 1, 0, 0, 0, 2, 1]} : (tensor<1x2x5x5xf32>) -> tensor<1x2x8x6xf32>
  %y = "tg.conv2d"(%p, %w) {layout = "NCHW", pads = [1, 0, 0, 1]} : (tensor<1x2x8x6xf32>, tensor<2x2x3x3xf32>) -> tensor<1x2x7x5xf32>
  // CHECK-NOT: "tg.pad"
  // CHECK: "tg.conv2d"(%arg0, %{{.*}}) {{{.*}}pads = [2{{( : i64)?}}, 2{{( : i64)?}}, 0{{( : i64)?}}, 2{{( : i64)?}}]
  func.return %y : tensor<1x2x7x5xf32>
}

// ZeroPadding2D((1, 1)) then a VALID 3x3/2 max pool on a ReLU output: folds (values >= 0).
// CHECK-LABEL: func.func @pool_after_relu
func.func @pool_after_relu(%x: tensor<1x8x8x2xf32>) -> tensor<1x4x4x2xf32> {
  %r = "tg.relu"(%x) : (tensor<1x8x8x2xf32>) -> tensor<1x8x8x2xf32>
  %p = "tg.pad"(%r) {pads = [0, 1, 1, 0, 0, 1, 1, 0]} : (tensor<1x8x8x2xf32>) -> tensor<1x10x10x2xf32>
  %y = "tg.max_pool2d"(%p) {layout = "NHWC", ksize = [3, 3], strides = [2, 2]} : (tensor<1x10x10x2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK-NOT: "tg.pad"
  // CHECK: %[[P:.*]] = "tg.max_pool2d"(%{{.*}}) {{{.*}}pads = [1{{( : i64)?}}, 1{{( : i64)?}}, 1{{( : i64)?}}, 1{{( : i64)?}}]
  // CHECK-NEXT: func.return %[[P]]
  func.return %y : tensor<1x4x4x2xf32>
}

// The same pool on a value of unknown sign keeps the pad (max pools pad with -inf).
// CHECK-LABEL: func.func @pool_any_sign
func.func @pool_any_sign(%x: tensor<1x8x8x2xf32>) -> tensor<1x4x4x2xf32> {
  %p = "tg.pad"(%x) {pads = [0, 1, 1, 0, 0, 1, 1, 0]} : (tensor<1x8x8x2xf32>) -> tensor<1x10x10x2xf32>
  // CHECK: %[[P:.*]] = "tg.pad"(%arg0)
  // CHECK: "tg.max_pool2d"(%[[P]])
  %y = "tg.max_pool2d"(%p) {layout = "NHWC", ksize = [3, 3], strides = [2, 2]} : (tensor<1x10x10x2xf32>) -> tensor<1x4x4x2xf32>
  func.return %y : tensor<1x4x4x2xf32>
}

// Not folded: a non-zero pad value, padding of the batch or channel dims, a SAME conv.
// CHECK-LABEL: func.func @kept
func.func @kept(%x: tensor<1x4x4x2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x6x6x2xf32>) {
  %w = "tg.constant"() {value = dense<1.0> : tensor<3x3x2x2xf32>} : () -> tensor<3x3x2x2xf32>
  %w4 = "tg.constant"() {value = dense<1.0> : tensor<3x3x4x2xf32>} : () -> tensor<3x3x4x2xf32>
  // CHECK: %[[P1:.*]] = "tg.pad"(%arg0) {{{.*}}value = 1.0
  %p1 = "tg.pad"(%x) {pads = [0, 1, 1, 0, 0, 1, 1, 0], value = 1.0} : (tensor<1x4x4x2xf32>) -> tensor<1x6x6x2xf32>
  // CHECK: "tg.conv2d"(%[[P1]]
  %y1 = "tg.conv2d"(%p1, %w) {layout = "NHWC"} : (tensor<1x6x6x2xf32>, tensor<3x3x2x2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK: %[[P2:.*]] = "tg.pad"(%arg0)
  %p2 = "tg.pad"(%x) {pads = [0, 1, 1, 1, 0, 1, 1, 1]} : (tensor<1x4x4x2xf32>) -> tensor<1x6x6x4xf32>
  // CHECK: "tg.conv2d"(%[[P2]]
  %y2 = "tg.conv2d"(%p2, %w4) {layout = "NHWC"} : (tensor<1x6x6x4xf32>, tensor<3x3x4x2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK: %[[P3:.*]] = "tg.pad"(%arg0)
  %p3 = "tg.pad"(%x) {pads = [0, 1, 1, 0, 0, 1, 1, 0]} : (tensor<1x4x4x2xf32>) -> tensor<1x6x6x2xf32>
  // CHECK: "tg.conv2d"(%[[P3]]
  %y3 = "tg.conv2d"(%p3, %w) {layout = "NHWC", padding = "SAME"} : (tensor<1x6x6x2xf32>, tensor<3x3x2x2xf32>) -> tensor<1x6x6x2xf32>
  func.return %y1, %y2, %y3 : tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x6x6x2xf32>
}
