// no_bef_translation
// RUN: tfrt_opt -tg-fuse-squeeze-excite -tg-dce %s | FileCheck %s

// MobileNetV3's block (NHWC): pool, 1x1 conv + relu, 1x1 conv, hard_sigmoid, mul -> one op;
// the filters become [C, R] / [R, C] matrices.
// CHECK-LABEL: func.func @hard_gate
func.func @hard_gate(%x: tensor<?x4x4x2xf32>) -> tensor<?x4x4x2xf32> {
  %w1 = "tg.constant"() {value = dense<[[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]]> : tensor<1x1x2x3xf32>} : () -> tensor<1x1x2x3xf32>
  %b1 = "tg.constant"() {value = dense<[0.5, 0.25, 0.125]> : tensor<3xf32>} : () -> tensor<3xf32>
  %w2 = "tg.constant"() {value = dense<1.0> : tensor<1x1x3x2xf32>} : () -> tensor<1x1x3x2xf32>
  %b2 = "tg.constant"() {value = dense<[1.0, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %p = "tg.global_avg_pool"(%x) {layout = "NHWC"} : (tensor<?x4x4x2xf32>) -> tensor<?x1x1x2xf32>
  %h = "tg.conv2d"(%p, %w1, %b1) {layout = "NHWC", activation = "relu", epilogue_operands = [1, 0]} : (tensor<?x1x1x2xf32>, tensor<1x1x2x3xf32>, tensor<3xf32>) -> tensor<?x1x1x3xf32>
  %g = "tg.conv2d"(%h, %w2, %b2) {layout = "NHWC", epilogue_operands = [1, 0]} : (tensor<?x1x1x3xf32>, tensor<1x1x3x2xf32>, tensor<2xf32>) -> tensor<?x1x1x2xf32>
  %s = "tg.hard_sigmoid"(%g) {alpha = 0.1666666716337204 : f32, beta = 0.5 : f32} : (tensor<?x1x1x2xf32>) -> tensor<?x1x1x2xf32>
  %y = "tg.mul"(%x, %s) : (tensor<?x4x4x2xf32>, tensor<?x1x1x2xf32>) -> tensor<?x4x4x2xf32>
  // CHECK: %[[W1:.*]] = "tg.constant"() {value = dense<{{\[\[}}1.000000e+00, 2.000000e+00, 3.000000e+00], [4.000000e+00, 5.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>}
  // CHECK: %[[W2:.*]] = "tg.constant"() {value = dense<1.000000e+00> : tensor<3x2xf32>}
  // CHECK: %[[Y:.*]] = "tg.squeeze_excite"(%arg0, %[[W1]], %{{.*}}, %[[W2]], %{{.*}}) {activation = "relu", alpha = 0.000000e+00, gate = "hard_sigmoid", gate_alpha = 0.1666666716337204, gate_beta = 5.000000e-01, layout = "NHWC"} : (tensor<?x4x4x2xf32>, tensor<2x3xf32>, tensor<3xf32>, tensor<3x2xf32>, tensor<2xf32>) -> tensor<?x4x4x2xf32>
  // CHECK-NOT: tg.global_avg_pool
  // CHECK-NOT: tg.conv2d
  // CHECK-NEXT: func.return %[[Y]]
  func.return %y : tensor<?x4x4x2xf32>
}

// EfficientNet's block (NCHW here): SiLU inside, the sigmoid fused into the second conv, the
// gate as the mul's first operand; no bias on the first conv (zeros).  OIHW filters transpose.
// CHECK-LABEL: func.func @sigmoid_gate
func.func @sigmoid_gate(%x: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
  %w1 = "tg.constant"() {value = dense<[[[[1.0]], [[2.0]]]]> : tensor<1x2x1x1xf32>} : () -> tensor<1x2x1x1xf32>
  %w2 = "tg.constant"() {value = dense<[[[[3.0]]], [[[4.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
  %b2 = "tg.constant"() {value = dense<[1.0, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %p = "tg.global_avg_pool"(%x) {layout = "NCHW"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x1x1xf32>
  %h = "tg.conv2d"(%p, %w1) {layout = "NCHW", activation = "silu"} : (tensor<1x2x1x1xf32>, tensor<1x2x1x1xf32>) -> tensor<1x1x1x1xf32>
  %g = "tg.conv2d"(%h, %w2, %b2) {layout = "NCHW", activation = "sigmoid", epilogue_operands = [1, 0]} : (tensor<1x1x1x1xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x1x1xf32>
  %y = "tg.mul"(%g, %x) : (tensor<1x2x1x1xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  // CHECK: %[[W1:.*]] = "tg.constant"() {value = dense<{{\[\[}}1.000000e+00], [2.000000e+00]]> : tensor<2x1xf32>}
  // CHECK-NEXT: %[[B1:.*]] = "tg.constant"() {value = dense<0.000000e+00> : tensor<1xf32>}
  // CHECK-NEXT: %[[W2:.*]] = "tg.constant"() {value = dense<{{\[\[}}3.000000e+00, 4.000000e+00]]> : tensor<1x2xf32>}
  // CHECK: "tg.squeeze_excite"(%arg0, %[[W1]], %[[B1]], %[[W2]], %{{.*}}) {activation = "silu", {{.*}}gate = "sigmoid", {{.*}}layout = "NCHW"}
  func.return %y : tensor<1x2x3x3xf32>
}

// Not fused: the pooled value has a second user; a gate that is not a sigmoid.
// CHECK-LABEL: func.func @blocked
func.func @blocked(%x: tensor<1x2x2x2xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x1x1x2xf32>, tensor<1x2x2x2xf32>) {
  %w = "tg.constant"() {value = dense<1.0> : tensor<1x1x2x2xf32>} : () -> tensor<1x1x2x2xf32>
  %p = "tg.global_avg_pool"(%x) {layout = "NHWC"} : (tensor<1x2x2x2xf32>) -> tensor<1x1x1x2xf32>
  %h = "tg.conv2d"(%p, %w) {layout = "NHWC", activation = "relu"} : (tensor<1x1x1x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x1x2xf32>
  %g = "tg.conv2d"(%h, %w) {layout = "NHWC", activation = "sigmoid"} : (tensor<1x1x1x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x1x2xf32>
  %y = "tg.mul"(%x, %g) : (tensor<1x2x2x2xf32>, tensor<1x1x1x2xf32>) -> tensor<1x2x2x2xf32>
  %q = "tg.global_avg_pool"(%x) {layout = "NHWC"} : (tensor<1x2x2x2xf32>) -> tensor<1x1x1x2xf32>
  %h2 = "tg.conv2d"(%q, %w) {layout = "NHWC", activation = "relu"} : (tensor<1x1x1x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x1x2xf32>
  %g2 = "tg.conv2d"(%h2, %w) {layout = "NHWC", activation = "tanh"} : (tensor<1x1x1x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x1x2xf32>
  %y2 = "tg.mul"(%x, %g2) : (tensor<1x2x2x2xf32>, tensor<1x1x1x2xf32>) -> tensor<1x2x2x2xf32>
  // CHECK-NOT: tg.squeeze_excite
  // CHECK: "tg.global_avg_pool"
  // CHECK: "tg.global_avg_pool"
  // CHECK-NOT: tg.squeeze_excite
  func.return %y, %p, %y2 : tensor<1x2x2x2xf32>, tensor<1x1x1x2xf32>, tensor<1x2x2x2xf32>
}

// TensorFlow's graph of Keras' block: reduce_mean over H, W without keepdims, a reshape to
// [N, 1, 1, C], the convs (SiLU already fused), the gate's mul.
// CHECK-LABEL: func.func @keras_mean
func.func @keras_mean(%x: tensor<?x3x3x2xf32>) -> tensor<?x3x3x2xf32> {
  %w1 = "tg.constant"() {value = dense<1.0> : tensor<1x1x2x1xf32>} : () -> tensor<1x1x2x1xf32>
  %w2 = "tg.constant"() {value = dense<1.0> : tensor<1x1x1x2xf32>} : () -> tensor<1x1x1x2xf32>
  %m = "tg.reduce_mean"(%x) {axes = [1, 2], keepdims = false} : (tensor<?x3x3x2xf32>) -> tensor<?x2xf32>
  %p = "tg.reshape"(%m) {shape = [-1, 1, 1, 2]} : (tensor<?x2xf32>) -> tensor<?x1x1x2xf32>
  %h = "tg.conv2d"(%p, %w1) {layout = "NHWC", activation = "silu"} : (tensor<?x1x1x2xf32>, tensor<1x1x2x1xf32>) -> tensor<?x1x1x1xf32>
  %g = "tg.conv2d"(%h, %w2) {layout = "NHWC", activation = "sigmoid"} : (tensor<?x1x1x1xf32>, tensor<1x1x1x2xf32>) -> tensor<?x1x1x2xf32>
  %y = "tg.mul"(%x, %g) : (tensor<?x3x3x2xf32>, tensor<?x1x1x2xf32>) -> tensor<?x3x3x2xf32>
  // CHECK: %[[Y:.*]] = "tg.squeeze_excite"(%arg0, {{.*}}) {activation = "silu", {{.*}}gate = "sigmoid", {{.*}}layout = "NHWC"}
  // CHECK-NOT: tg.reduce_mean
  // CHECK-NEXT: func.return %[[Y]]
  func.return %y : tensor<?x3x3x2xf32>
}

// Keras' MobileNetV3 block (TensorFlow graph): reduce_mean, the gate as relu6(g + 3) * (1 / 6).
// CHECK-LABEL: func.func @keras_hard_gate
func.func @keras_hard_gate(%x: tensor<?x4x4x2xf32>) -> tensor<?x4x4x2xf32> {
  %w1 = "tg.constant"() {value = dense<1.0> : tensor<1x1x2x3xf32>} : () -> tensor<1x1x2x3xf32>
  %w2 = "tg.constant"() {value = dense<1.0> : tensor<1x1x3x2xf32>} : () -> tensor<1x1x3x2xf32>
  %b2 = "tg.constant"() {value = dense<[1.0, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %three = "tg.constant"() {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %sixth = "tg.constant"() {value = dense<0.16666667> : tensor<f32>} : () -> tensor<f32>
  %p = "tg.reduce_mean"(%x) {axes = [1, 2], keepdims = true} : (tensor<?x4x4x2xf32>) -> tensor<?x1x1x2xf32>
  %h = "tg.conv2d"(%p, %w1) {layout = "NHWC", activation = "relu"} : (tensor<?x1x1x2xf32>, tensor<1x1x2x3xf32>) -> tensor<?x1x1x3xf32>
  %g = "tg.conv2d"(%h, %w2, %b2) {layout = "NHWC", epilogue_operands = [1, 0]} : (tensor<?x1x1x3xf32>, tensor<1x1x3x2xf32>, tensor<2xf32>) -> tensor<?x1x1x2xf32>
  %a = "tg.add"(%g, %three) : (tensor<?x1x1x2xf32>, tensor<f32>) -> tensor<?x1x1x2xf32>
  %r = "tg.relu6"(%a) : (tensor<?x1x1x2xf32>) -> tensor<?x1x1x2xf32>
  %s = "tg.mul"(%r, %sixth) : (tensor<?x1x1x2xf32>, tensor<f32>) -> tensor<?x1x1x2xf32>
  %y = "tg.mul"(%x, %s) : (tensor<?x4x4x2xf32>, tensor<?x1x1x2xf32>) -> tensor<?x4x4x2xf32>
  // CHECK: %[[Y:.*]] = "tg.squeeze_excite"(%arg0, {{.*}}) {activation = "relu", alpha = 0.000000e+00, gate = "hard_sigmoid", gate_alpha = 0.166666{{[0-9]*}}, gate_beta = 5.000000e-01, layout = "NHWC"}
  // CHECK-NOT: tg.relu6
  // CHECK-NEXT: func.return %[[Y]]
  func.return %y : tensor<?x4x4x2xf32>
}
