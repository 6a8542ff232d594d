// no_bef_translation
// RUN: tfrt_opt -tg-plan-buffers %s | FileCheck %s

// An int8 convolution's fused residual (its last operand) may share the result's buffer as a
// float convolution's does: %c1's residual %a dies there, so %c1 writes into %a's slot 0 (the
// kernel then skips copying the residual into its result); %c2's residual %c1 is read again
// later (by %d), so %c2 gets a slot of its own.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<1x4x4x2xui8>, %w: tensor<1x1x2x2xi8>, %s: tensor<2xf32>) -> tensor<1x4x4x2xui8> {
  // CHECK: %[[A:.*]] = "tg.max_pool2d"(%arg0) {{.*}}tg.buffer = [0, 0, 0, 2]}
  %a = "tg.max_pool2d"(%x) {layout = "NHWC", ksize = [1, 1], strides = [1, 1]} : (tensor<1x4x4x2xui8>) -> tensor<1x4x4x2xui8>
  // CHECK: %[[B:.*]] = "tg.max_pool2d"(%[[A]]) {{.*}}tg.buffer = [1, 1, 1, 3]}
  %b = "tg.max_pool2d"(%a) {layout = "NHWC", ksize = [1, 1], strides = [1, 1]} : (tensor<1x4x4x2xui8>) -> tensor<1x4x4x2xui8>
  // CHECK: %[[C1:.*]] = "tg.qconv2d"(%[[B]], %arg1, %arg2, %[[A]]) {{.*}}tg.buffer = [0, 2, 2, 4]}
  %c1 = "tg.qconv2d"(%b, %w, %s, %a) {layout = "NHWC", x_scale = 0.5 : f32, y_scale = 0.25 : f32, residual_scale = 0.5 : f32, epilogue_operands = [0, 1]} : (tensor<1x4x4x2xui8>, tensor<1x1x2x2xi8>, tensor<2xf32>, tensor<1x4x4x2xui8>) -> tensor<1x4x4x2xui8>
  // CHECK: %[[C2:.*]] = "tg.qconv2d"(%[[B]], %arg1, %arg2, %[[C1]]) {{.*}}tg.buffer = [2, 3, 3, 4]}
  %c2 = "tg.qconv2d"(%b, %w, %s, %c1) {layout = "NHWC", x_scale = 0.5 : f32, y_scale = 0.25 : f32, residual_scale = 0.5 : f32, epilogue_operands = [0, 1]} : (tensor<1x4x4x2xui8>, tensor<1x1x2x2xi8>, tensor<2xf32>, tensor<1x4x4x2xui8>) -> tensor<1x4x4x2xui8>
  // CHECK: %[[D:.*]] = "tg.qconv2d"(%[[C2]], %arg1, %arg2, %[[C1]])
  // CHECK-NOT: tg.buffer
  // CHECK: func.return %[[D]]
  %d = "tg.qconv2d"(%c2, %w, %s, %c1) {layout = "NHWC", x_scale = 0.5 : f32, y_scale = 0.25 : f32, residual_scale = 0.5 : f32, epilogue_operands = [0, 1]} : (tensor<1x4x4x2xui8>, tensor<1x1x2x2xi8>, tensor<2xf32>, tensor<1x4x4x2xui8>) -> tensor<1x4x4x2xui8>
  func.return %d : tensor<1x4x4x2xui8>
}
