// no_bef_translation
// RUN: tfrt_opt -tg-fold-batch-norm %s | FileCheck %s
// RUN: tfrt_opt -tg-fold-batch-norm -tg-fuse-epilogue -tg-dce %s | FileCheck %s --check-prefix=FUSED

// conv (NHWC, 1x1, 2 -> 2 channels) then batch norm: s = scale / sqrt(var + eps) = [1, 0.5];
// the filter's output channels scale by s, the bias is (0 - mean) * s + offset = [0, 1].
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<?x4x4x2xf32>) -> tensor<?x4x4x2xf32> {
  %w = "tg.constant"() {value = dense<[[[[1.0, 2.0], [3.0, 4.0]]]]> : tensor<1x1x2x2xf32>} : () -> tensor<1x1x2x2xf32>
  %scale = "tg.constant"() {value = dense<[2.0, 0.5]> : tensor<2xf32>} : () -> tensor<2xf32>
  %offset = "tg.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %mean = "tg.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %var = "tg.constant"() {value = dense<[3.0, 0.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %y = "tg.conv2d"(%x, %w) {layout = "NHWC", strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], groups = 1} : (tensor<?x4x4x2xf32>, tensor<1x1x2x2xf32>) -> tensor<?x4x4x2xf32>
  // CHECK: %[[W:.*]] = "tg.constant"() {value = dense<{{\[\[\[\[}}1.000000e+00, 1.000000e+00], [3.000000e+00, 2.000000e+00]]]]> : tensor<1x1x2x2xf32>}
  // CHECK: %[[B:.*]] = "tg.constant"() {value = dense<[0.000000e+00, 1.000000e+00]> : tensor<2xf32>}
  // CHECK: %[[C:.*]] = "tg.conv2d"(%arg0, %[[W]])
  // CHECK: %[[A:.*]] = "tg.add"(%[[C]], %[[B]])
  // CHECK-NOT: "tg.batch_norm"
  %z = "tg.batch_norm"(%y, %scale, %offset, %mean, %var) {epsilon = 1.0, axis = 3} : (tensor<?x4x4x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<?x4x4x2xf32>
  // CHECK: func.return %[[A]]
  func.return %z : tensor<?x4x4x2xf32>
}

// With the epilogue fusion the add becomes the conv's bias.
// FUSED: %[[C:.*]] = "tg.conv2d"(%arg0, %{{.*}}, %{{.*}}) {dilations = [1{{( : i64)?}}, 1{{( : i64)?}}], epilogue_operands = [1{{( : i64)?}}, 0{{( : i64)?}}], groups = 1{{( : i64)?}}, layout = "NHWC"
// FUSED-NEXT: func.return %[[C]]
