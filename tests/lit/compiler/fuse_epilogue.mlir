// no_bef_translation
// RUN: tfrt_opt -tg-fuse-epilogue -tg-dce %s | FileCheck %s

// matmul + bias + relu: one fused matmul.
// CHECK-LABEL: func.func @dense
func.func @dense(%x: tensor<?x3xf32>) -> tensor<?x2xf32> {
  %w = "tg.constant"() {value = dense<1.0> : tensor<3x2xf32>} : () -> tensor<3x2xf32>
  %b = "tg.constant"() {value = dense<[0.5, -0.5]> : tensor<2xf32>} : () -> tensor<2xf32>
  %y = "tg.matmul"(%x, %w) {transpose_a = false, transpose_b = false} : (tensor<?x3xf32>, tensor<3x2xf32>) -> tensor<?x2xf32>
  %z = "tg.add"(%y, %b) : (tensor<?x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  %r = "tg.relu"(%z) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  // CHECK: %[[M:.*]] = "tg.matmul"(%arg0, %{{.*}}, %{{.*}}) {activation = "relu", epilogue_operands = [1, 0], transpose_a = false, transpose_b = false} : (tensor<?x3xf32>, tensor<3x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  // CHECK-NEXT: func.return %[[M]]
  func.return %r : tensor<?x2xf32>
}

// A ResNet block tail: conv (NCHW) + per-channel bias [C, 1, 1] + residual + relu6.
// CHECK-LABEL: func.func @block
func.func @block(%x: tensor<1x2x4x4xf32>, %skip: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %w = "tg.constant"() {value = dense<0.25> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
  %b = "tg.constant"() {value = dense<[[[1.0]], [[2.0]]]> : tensor<2x1x1xf32>} : () -> tensor<2x1x1xf32>
  %y = "tg.conv2d"(%x, %w) {layout = "NCHW"} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %z = "tg.add"(%y, %b) : (tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %s = "tg.add"(%skip, %z) : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %r = "tg.relu6"(%s) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  // CHECK: %[[B:.*]] = "tg.constant"() {value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>}
  // CHECK: %[[C:.*]] = "tg.conv2d"(%arg0, %{{.*}}, %[[B]], %arg1) {activation = "relu6", {{.*}}epilogue_operands = [1, 1]
  // CHECK-NEXT: func.return %[[C]]
  func.return %r : tensor<1x2x4x4xf32>
}

// Not fused: an activation already applied blocks a later add; a second user blocks fusion.
// CHECK-LABEL: func.func @blocked
func.func @blocked(%x: tensor<2x2xf32>, %w: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>) {
  %y = "tg.matmul"(%x, %w) {transpose_a = false, transpose_b = false} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %r = "tg.relu"(%y) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %z = "tg.add"(%r, %x) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %u = "tg.matmul"(%x, %w) {transpose_a = false, transpose_b = false} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %v = "tg.sigmoid"(%u) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %t = "tg.add"(%v, %u) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  // CHECK: %[[A:.*]] = "tg.matmul"(%arg0, %arg1) {activation = "relu"
  // CHECK-NEXT: %[[Z:.*]] = "tg.add"(%[[A]], %arg0)
  // CHECK-NEXT: %[[U:.*]] = "tg.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = false}
  // CHECK-NEXT: "tg.sigmoid"(%[[U]])
  // CHECK-NEXT: "tg.add"
  func.return %z, %t : tensor<2x2xf32>, tensor<2x2xf32>
}

// An activation after a reshape of the matmul (GPT-2's MLP: rows viewed back as
// [batch, seq, d]) moves into the matmul; the reshape stays.  A reshape with another user is
// left alone.
// CHECK-LABEL: func.func @through_reshape
func.func @through_reshape(%x: tensor<4x3xf32>) -> (tensor<1x4x2xf32>, tensor<1x4x2xf32>, tensor<1x4x2xf32>) {
  %w = "tg.constant"() {value = dense<1.0> : tensor<3x2xf32>} : () -> tensor<3x2xf32>
  %y = "tg.matmul"(%x, %w) {transpose_a = false, transpose_b = false} : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %r = "tg.reshape"(%y) {shape = [1, 4, 2]} : (tensor<4x2xf32>) -> tensor<1x4x2xf32>
  %g = "tg.gelu"(%r) {approximate = true} : (tensor<1x4x2xf32>) -> tensor<1x4x2xf32>
  %u = "tg.matmul"(%x, %w) {transpose_a = false, transpose_b = false} : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %v = "tg.reshape"(%u) {shape = [1, 4, 2]} : (tensor<4x2xf32>) -> tensor<1x4x2xf32>
  %s = "tg.sigmoid"(%v) : (tensor<1x4x2xf32>) -> tensor<1x4x2xf32>
  // CHECK: %[[M:.*]] = "tg.matmul"(%arg0, %{{.*}}) {activation = "gelu_tanh"
  // CHECK-NEXT: %[[R:.*]] = "tg.reshape"(%[[M]])
  // CHECK-NEXT: %[[U:.*]] = "tg.matmul"(%arg0, %{{.*}}) {transpose_a = false, transpose_b = false}
  // CHECK-NEXT: %[[V:.*]] = "tg.reshape"(%[[U]])
  // CHECK-NEXT: "tg.sigmoid"(%[[V]])
  // CHECK-NEXT: func.return %[[R]], %[[V]]
  func.return %g, %v, %s : tensor<1x4x2xf32>, tensor<1x4x2xf32>, tensor<1x4x2xf32>
}

// SiLU written out (TensorFlow's graph of Keras 3's swish: y * sigmoid(1 * y), after a bias)
// becomes the conv's silu; with a second user of the sigmoid it stays.
// CHECK-LABEL: func.func @swish
func.func @swish(%x: tensor<1x4x4x2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) {
  %w = "tg.constant"() {value = dense<0.5> : tensor<1x1x2x2xf32>} : () -> tensor<1x1x2x2xf32>
  %b = "tg.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %one = "tg.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %y = "tg.conv2d"(%x, %w) {layout = "NHWC"} : (tensor<1x4x4x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x4x4x2xf32>
  %z = "tg.add"(%y, %b) : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %t = "tg.mul"(%one, %z) : (tensor<f32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %s = "tg.sigmoid"(%t) : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %r = "tg.mul"(%z, %s) : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %y2 = "tg.conv2d"(%x, %w) {layout = "NHWC"} : (tensor<1x4x4x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x4x4x2xf32>
  %s2 = "tg.sigmoid"(%y2) : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %r2 = "tg.mul"(%s2, %y2) : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %y3 = "tg.conv2d"(%x, %w) {layout = "NHWC"} : (tensor<1x4x4x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x4x4x2xf32>
  %s3 = "tg.sigmoid"(%y3) : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %r3 = "tg.mul"(%s3, %y3) : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %u3 = "tg.add"(%r3, %s3) : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK: %[[A:.*]] = "tg.conv2d"(%arg0, %{{.*}}, %{{.*}}) {activation = "silu", {{.*}}epilogue_operands = [1, 0]
  // CHECK-NEXT: %[[B:.*]] = "tg.conv2d"(%arg0, %{{.*}}) {activation = "silu"
  // CHECK-NEXT: %[[C:.*]] = "tg.conv2d"(%arg0, %{{.*}}) {layout = "NHWC"}
  // CHECK-NEXT: %[[S:.*]] = "tg.sigmoid"(%[[C]])
  // CHECK-NEXT: "tg.mul"(%[[S]], %[[C]])
  // CHECK: func.return %[[A]], %[[B]]
  func.return %r, %r2, %u3 : tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>
}

// Hard-swish written out (TensorFlow's graph of Keras' MobileNetV3: y * (relu6(y + 3) / 6),
// also with * (1 / 6)) becomes the conv's hard_swish; a + 2 instead of + 3 stays.
// CHECK-LABEL: func.func @hard_swish
func.func @hard_swish(%x: tensor<1x4x4x2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) {
  %w = "tg.constant"() {value = dense<0.5> : tensor<1x1x2x2xf32>} : () -> tensor<1x1x2x2xf32>
  %b = "tg.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %three = "tg.constant"() {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %two = "tg.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %six = "tg.constant"() {value = dense<6.0> : tensor<f32>} : () -> tensor<f32>
  %sixth = "tg.constant"() {value = dense<0.16666667> : tensor<f32>} : () -> tensor<f32>
  %y = "tg.conv2d"(%x, %w) {layout = "NHWC"} : (tensor<1x4x4x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x4x4x2xf32>
  %z = "tg.add"(%y, %b) : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %a = "tg.add"(%z, %three) : (tensor<1x4x4x2xf32>, tensor<f32>) -> tensor<1x4x4x2xf32>
  %c = "tg.relu6"(%a) : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %d = "tg.div"(%c, %six) : (tensor<1x4x4x2xf32>, tensor<f32>) -> tensor<1x4x4x2xf32>
  %r = "tg.mul"(%z, %d) : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %y2 = "tg.conv2d"(%x, %w) {layout = "NHWC"} : (tensor<1x4x4x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x4x4x2xf32>
  %a2 = "tg.add"(%three, %y2) : (tensor<f32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %c2 = "tg.relu6"(%a2) : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %d2 = "tg.mul"(%sixth, %c2) : (tensor<f32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %r2 = "tg.mul"(%d2, %y2) : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %y3 = "tg.conv2d"(%x, %w) {layout = "NHWC"} : (tensor<1x4x4x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x4x4x2xf32>
  %a3 = "tg.add"(%y3, %two) : (tensor<1x4x4x2xf32>, tensor<f32>) -> tensor<1x4x4x2xf32>
  %c3 = "tg.relu6"(%a3) : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %d3 = "tg.div"(%c3, %six) : (tensor<1x4x4x2xf32>, tensor<f32>) -> tensor<1x4x4x2xf32>
  %r3 = "tg.mul"(%y3, %d3) : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK: %[[A:.*]] = "tg.conv2d"(%arg0, %{{.*}}, %{{.*}}) {activation = "hard_swish", {{.*}}epilogue_operands = [1, 0]
  // CHECK-NEXT: %[[B:.*]] = "tg.conv2d"(%arg0, %{{.*}}) {activation = "hard_swish"
  // CHECK-NEXT: %[[C:.*]] = "tg.conv2d"(%arg0, %{{.*}}) {layout = "NHWC"}
  // CHECK-NEXT: "tg.add"(%[[C]], %{{.*}})
  // CHECK: func.return %[[A]], %[[B]]
  func.return %r, %r2, %r3 : tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>
}

// A training step's bias is a variable, not a constant: an NHWC conv2d takes a 1-D bias of its
// output channels as its epilogue operand all the same (its plan is made per call anyway); a
// matmul, an NCHW conv2d (whose add broadcasts along W) and a one-value bias keep their add.
// CHECK-LABEL: func.func @variable_bias
func.func @variable_bias(%x: tensor<?x4x4x2xf32>, %w: tensor<1x1x2x3xf32>, %b: tensor<3xf32>, %xm: tensor<?x2xf32>, %wm: tensor<2x3xf32>, %xc: tensor<1x2x4x3xf32>, %wc: tensor<3x2x1x1xf32>, %b1: tensor<1xf32>) -> (tensor<?x4x4x3xf32>, tensor<?x3xf32>, tensor<1x3x4x3xf32>, tensor<?x4x4x3xf32>) {
  %y = "tg.conv2d"(%x, %w) {layout = "NHWC"} : (tensor<?x4x4x2xf32>, tensor<1x1x2x3xf32>) -> tensor<?x4x4x3xf32>
  %z = "tg.add"(%y, %b) : (tensor<?x4x4x3xf32>, tensor<3xf32>) -> tensor<?x4x4x3xf32>
  // CHECK: %[[C:.*]] = "tg.conv2d"(%arg0, %arg1, %arg2) {{{.*}}epilogue_operands = [1, 0]{{.*}}} : (tensor<?x4x4x2xf32>, tensor<1x1x2x3xf32>, tensor<3xf32>) -> tensor<?x4x4x3xf32>
  %m = "tg.matmul"(%xm, %wm) {transpose_a = false, transpose_b = false} : (tensor<?x2xf32>, tensor<2x3xf32>) -> tensor<?x3xf32>
  %n = "tg.add"(%m, %b) : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  // CHECK: %[[M:.*]] = "tg.matmul"(%arg3, %arg4) {transpose_a = false, transpose_b = false}
  // CHECK-NEXT: %[[N:.*]] = "tg.add"(%[[M]], %arg2)
  %c = "tg.conv2d"(%xc, %wc) {layout = "NCHW"} : (tensor<1x2x4x3xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x3xf32>
  %d = "tg.add"(%c, %b) : (tensor<1x3x4x3xf32>, tensor<3xf32>) -> tensor<1x3x4x3xf32>
  // CHECK: %[[K:.*]] = "tg.conv2d"(%arg5, %arg6) {
  // CHECK-NEXT: "tg.add"(%[[K]], %arg2)
  %e = "tg.conv2d"(%x, %w) {layout = "NHWC"} : (tensor<?x4x4x2xf32>, tensor<1x1x2x3xf32>) -> tensor<?x4x4x3xf32>
  %f = "tg.add"(%e, %b1) : (tensor<?x4x4x3xf32>, tensor<1xf32>) -> tensor<?x4x4x3xf32>
  // CHECK: %[[E:.*]] = "tg.conv2d"(%arg0, %arg1) {
  // CHECK-NEXT: "tg.add"(%[[E]], %arg7)
  func.return %z, %n, %d, %f : tensor<?x4x4x3xf32>, tensor<?x3xf32>, tensor<1x3x4x3xf32>, tensor<?x4x4x3xf32>
}
