// no_bef_translation
// RUN: env PYTFRT_NUM_THREADS=1 tfrt_opt -tg-conv-nchw-input %s | FileCheck %s
// RUN: env PYTFRT_NUM_THREADS=2 tfrt_opt -tg-conv-nchw-input %s | FileCheck %s --check-prefix=TWO
// RUN: env PYTFRT_NUM_THREADS=1 PYTFRT_CONV_NCHW_INPUT=0 tfrt_opt -tg-conv-nchw-input %s | FileCheck %s --check-prefix=TWO

// A first convolution with 16 output channels reads the NCHW image: the transpose goes, the
// convolution keeps its filter, bias and activation and gives the same NHWC result.
// CHECK-LABEL: func.func @stem
// CHECK-NOT: "tg.transpose"
// CHECK: %[[Y:.*]] = "tg.conv2d"(%arg0, %{{.*}}, %{{.*}}) {activation = "hard_swish", {{.*}}layout = "NCHW>NHWC", pads = [1, 1, 1, 1], strides = [2, 2]{{.*}} : (tensor<?x3x9x9xf32>, tensor<3x3x3x16xf32>, tensor<16xf32>) -> tensor<?x5x5x16xf32>
// CHECK: func.return %[[Y]]
// Two threads, or switched off: unchanged.
// TWO-LABEL: func.func @stem
// TWO: "tg.transpose"
// TWO: layout = "NHWC"
func.func @stem(%x: tensor<?x3x9x9xf32>) -> tensor<?x5x5x16xf32> {
  %w = "tg.constant"() {value = dense<0.5> : tensor<3x3x3x16xf32>} : () -> tensor<3x3x3x16xf32>
  %b = "tg.constant"() {value = dense<0.1> : tensor<16xf32>} : () -> tensor<16xf32>
  %t = "tg.transpose"(%x) {perm = [0, 2, 3, 1]} : (tensor<?x3x9x9xf32>) -> tensor<?x9x9x3xf32>
  %y = "tg.conv2d"(%t, %w, %b) {layout = "NHWC", activation = "hard_swish", epilogue_operands = [1, 0], pads = [1, 1, 1, 1], strides = [2, 2]} : (tensor<?x9x9x3xf32>, tensor<3x3x3x16xf32>, tensor<16xf32>) -> tensor<?x5x5x16xf32>
  func.return %y : tensor<?x5x5x16xf32>
}

// Not rewritten: 32 output channels (oneDNN's NCHW kernel writes nChw16c, not NHWC), a fused
// residual, a transpose that something else reads too.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: layout = "NHWC"
// CHECK-NOT: NCHW>NHWC
func.func @kept(%x: tensor<1x3x8x8xf32>, %r: tensor<1x8x8x16xf32>) -> (tensor<1x8x8x32xf32>, tensor<1x8x8x16xf32>, tensor<1x8x8x16xf32>, tensor<1x8x8x3xf32>) {
  %w32 = "tg.constant"() {value = dense<0.5> : tensor<1x1x3x32xf32>} : () -> tensor<1x1x3x32xf32>
  %w16 = "tg.constant"() {value = dense<0.5> : tensor<1x1x3x16xf32>} : () -> tensor<1x1x3x16xf32>
  %t = "tg.transpose"(%x) {perm = [0, 2, 3, 1]} : (tensor<1x3x8x8xf32>) -> tensor<1x8x8x3xf32>
  %a = "tg.conv2d"(%t, %w32) {layout = "NHWC"} : (tensor<1x8x8x3xf32>, tensor<1x1x3x32xf32>) -> tensor<1x8x8x32xf32>
  %t2 = "tg.transpose"(%x) {perm = [0, 2, 3, 1]} : (tensor<1x3x8x8xf32>) -> tensor<1x8x8x3xf32>
  %c = "tg.conv2d"(%t2, %w16, %r) {layout = "NHWC", epilogue_operands = [0, 1]} : (tensor<1x8x8x3xf32>, tensor<1x1x3x16xf32>, tensor<1x8x8x16xf32>) -> tensor<1x8x8x16xf32>
  %t3 = "tg.transpose"(%x) {perm = [0, 2, 3, 1]} : (tensor<1x3x8x8xf32>) -> tensor<1x8x8x3xf32>
  %e = "tg.conv2d"(%t3, %w16) {layout = "NHWC"} : (tensor<1x8x8x3xf32>, tensor<1x1x3x16xf32>) -> tensor<1x8x8x16xf32>
  %d = "tg.relu"(%t3) : (tensor<1x8x8x3xf32>) -> tensor<1x8x8x3xf32>
  func.return %a, %c, %e, %d : tensor<1x8x8x32xf32>, tensor<1x8x8x16xf32>, tensor<1x8x8x16xf32>, tensor<1x8x8x3xf32>
}
