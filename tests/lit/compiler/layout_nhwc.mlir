// no_bef_translation
// RUN: tfrt_opt -tg-layout-nhwc -tg-dce %s | FileCheck %s
// RUN: tfrt_opt -tg-infer-shapes -tg-constant-fold -tg-dce -tg-fold-batch-norm -tg-layout-nhwc -tg-fuse-epilogue -tg-dce %s | FileCheck %s --check-prefix=PIPE

// In the default pipeline's order the [1, 1, 1, C] bias and the ReLU then fuse into the NHWC
// conv's epilogue as a 1-D bias.
// PIPE-LABEL: func.func @block
// PIPE-NEXT: %[[X:.*]] = "tg.transpose"(%arg0) {perm = [0, 2, 3, 1]}
// PIPE-NEXT: %[[W:.*]] = "tg.constant"() {{.*}} : tensor<1x1x2x2xf32>}
// PIPE-NEXT: %[[B:.*]] = "tg.constant"() {value = dense<[5.000000e-01, -5.000000e-01]> : tensor<2xf32>}
// PIPE-NEXT: %[[C:.*]] = "tg.conv2d"(%[[X]], %[[W]], %[[B]]) {activation = "relu", {{.*}}epilogue_operands = [1, 0], groups = 1, layout = "NHWC"
// PIPE-NEXT: "tg.add"(%[[C]], %[[X]])
// PIPE-NEXT: "tg.max_pool2d"
// PIPE-SAME: layout = "NHWC"

// An ONNX-style block (NCHW conv, [C, 1, 1] bias add, ReLU, a residual add of the input, max
// pool, global pool, flatten): the ops run NHWC after one transpose of the input; the OIHW
// filter becomes HWIO and the bias [1, 1, 1, C] at compile time; the residual reuses the input's
// transpose; the flatten of the [N, 1, 1, C] global pool needs no transpose.
// CHECK-LABEL: func.func @block
// CHECK-NEXT: %[[X:.*]] = "tg.transpose"(%arg0) {perm = [0, 2, 3, 1]} : (tensor<?x2x4x4xf32>) -> tensor<?x4x4x2xf32>
// CHECK-NEXT: %[[W:.*]] = "tg.constant"() {value = dense<{{\[\[\[\[}}1.000000e+00, 3.000000e+00], [2.000000e+00, 4.000000e+00]]]]> : tensor<1x1x2x2xf32>}
// CHECK-NEXT: %[[C:.*]] = "tg.conv2d"(%[[X]], %[[W]]) {{{.*}}layout = "NHWC"{{.*}}} : (tensor<?x4x4x2xf32>, tensor<1x1x2x2xf32>) -> tensor<?x4x4x2xf32>
// CHECK-NEXT: %[[B:.*]] = "tg.constant"() {value = dense<{{\[\[\[\[}}5.000000e-01, -5.000000e-01]]]]> : tensor<1x1x1x2xf32>}
// CHECK-NEXT: %[[A:.*]] = "tg.add"(%[[C]], %[[B]])
// CHECK-NEXT: %[[R:.*]] = "tg.relu"(%[[A]])
// CHECK-NEXT: %[[S:.*]] = "tg.add"(%[[R]], %[[X]]) : (tensor<?x4x4x2xf32>, tensor<?x4x4x2xf32>) -> tensor<?x4x4x2xf32>
// CHECK-NEXT: %[[P:.*]] = "tg.max_pool2d"(%[[S]]) {{{.*}}layout = "NHWC"{{.*}}} : (tensor<?x4x4x2xf32>) -> tensor<?x2x2x2xf32>
// CHECK-NEXT: %[[G:.*]] = "tg.global_avg_pool"(%[[P]]) {layout = "NHWC"} : (tensor<?x2x2x2xf32>) -> tensor<?x1x1x2xf32>
// CHECK-NEXT: %[[F:.*]] = "tg.reshape"(%[[G]]) {shape = [-1, 2]} : (tensor<?x1x1x2xf32>) -> tensor<?x2xf32>
// CHECK-NEXT: func.return %[[F]]
func.func @block(%x: tensor<?x2x4x4xf32>) -> tensor<?x2xf32> {
  %w = "tg.constant"() {value = dense<[[[[1.0]], [[2.0]]], [[[3.0]], [[4.0]]]]> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
  %b = "tg.constant"() {value = dense<[[[0.5]], [[-0.5]]]> : tensor<2x1x1xf32>} : () -> tensor<2x1x1xf32>
  %y = "tg.conv2d"(%x, %w) {layout = "NCHW"} : (tensor<?x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<?x2x4x4xf32>
  %z = "tg.add"(%y, %b) : (tensor<?x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<?x2x4x4xf32>
  %r = "tg.relu"(%z) : (tensor<?x2x4x4xf32>) -> tensor<?x2x4x4xf32>
  %s = "tg.add"(%r, %x) : (tensor<?x2x4x4xf32>, tensor<?x2x4x4xf32>) -> tensor<?x2x4x4xf32>
  %p = "tg.max_pool2d"(%s) {layout = "NCHW", ksize = [2, 2], strides = [2, 2]} : (tensor<?x2x4x4xf32>) -> tensor<?x2x2x2xf32>
  %g = "tg.global_avg_pool"(%p) {layout = "NCHW"} : (tensor<?x2x2x2xf32>) -> tensor<?x2x1x1xf32>
  %f = "tg.reshape"(%g) {shape = [-1, 2]} : (tensor<?x2x1x1xf32>) -> tensor<?x2xf32>
  func.return %f : tensor<?x2xf32>
}

// tf2onnx's NHWC -> NCHW transpose at a Keras model's input cancels with the conv's; an NCHW
// result gets one transpose at the end (after the softmax, whose axis follows the channels).
// CHECK-LABEL: func.func @keras
// CHECK-NEXT: %[[W:.*]] = "tg.constant"() {value = dense<5.000000e-01> : tensor<3x3x2x3xf32>}
// CHECK-NEXT: %[[C:.*]] = "tg.conv2d"(%arg0, %[[W]]) {{{.*}}layout = "NHWC", pads = [1, 1, 1, 1]{{.*}}} : (tensor<?x4x4x2xf32>, tensor<3x3x2x3xf32>) -> tensor<?x4x4x3xf32>
// CHECK-NEXT: %[[S:.*]] = "tg.softmax"(%[[C]]) {axis = 3}
// CHECK-NEXT: %[[T:.*]] = "tg.transpose"(%[[S]]) {perm = [0, 3, 1, 2]} : (tensor<?x4x4x3xf32>) -> tensor<?x3x4x4xf32>
// CHECK-NEXT: func.return %[[T]]
func.func @keras(%x: tensor<?x4x4x2xf32>) -> tensor<?x3x4x4xf32> {
  %t = "tg.transpose"(%x) {perm = [0, 3, 1, 2]} : (tensor<?x4x4x2xf32>) -> tensor<?x2x4x4xf32>
  %w = "tg.constant"() {value = dense<0.5> : tensor<3x2x3x3xf32>} : () -> tensor<3x2x3x3xf32>
  %y = "tg.conv2d"(%t, %w) {layout = "NCHW", pads = [1, 1, 1, 1]} : (tensor<?x2x4x4xf32>, tensor<3x2x3x3xf32>) -> tensor<?x3x4x4xf32>
  %s = "tg.softmax"(%y) {axis = 1} : (tensor<?x3x4x4xf32>) -> tensor<?x3x4x4xf32>
  func.return %s : tensor<?x3x4x4xf32>
}

// Axis and pad remapping: a depthwise conv (OIHW [2, 1, 3, 3] -> HWIO [3, 3, 1, 2]), pad,
// concat and split on the channels, a spatial mean (axes [2, 3] -> [1, 2], no transpose after
// it).  A general reshape (the NCHW flatten of a 4x4 map) keeps its transpose, as does a
// returned NCHW map.
// CHECK-LABEL: func.func @shapes
// CHECK-NEXT: %[[X:.*]] = "tg.transpose"(%arg0) {perm = [0, 2, 3, 1]}
// CHECK-NEXT: %[[W:.*]] = "tg.constant"() {value = dense<1.000000e+00> : tensor<3x3x1x2xf32>}
// CHECK-NEXT: %[[Y:.*]] = "tg.conv2d"(%[[X]], %[[W]]) {{{.*}}groups = 2, layout = "NHWC"
// CHECK-NEXT: %[[P:.*]] = "tg.pad"(%[[Y]]) {mode = "constant", pads = [0, 1, 1, 0, 0, 1, 1, 0], value = 0.000000e+00} : (tensor<1x4x4x2xf32>) -> tensor<1x6x6x2xf32>
// CHECK-NEXT: %[[C:.*]] = "tg.concat"(%[[P]], %[[P]]) {axis = 3} : (tensor<1x6x6x2xf32>, tensor<1x6x6x2xf32>) -> tensor<1x6x6x4xf32>
// CHECK-NEXT: %[[CT:.*]] = "tg.transpose"(%[[C]]) {perm = [0, 3, 1, 2]}
// CHECK-NEXT: %[[M:.*]] = "tg.reduce_mean"(%[[C]]) {axes = [1, 2], keepdims = false} : (tensor<1x6x6x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT: %[[S:.*]]:2 = "tg.split"(%[[Y]]) {axis = 3, sizes = [1, 1]}
// CHECK-NEXT: %[[D:.*]] = "tg.sub"(%[[S]]#0, %[[S]]#1) : (tensor<1x4x4x1xf32>, tensor<1x4x4x1xf32>)
// CHECK-NEXT: %[[E:.*]] = "tg.concat"(%[[D]], %[[S]]#0) {axis = 3}
// CHECK-NEXT: %[[ET:.*]] = "tg.transpose"(%[[E]]) {perm = [0, 3, 1, 2]}
// CHECK-NEXT: %[[F:.*]] = "tg.reshape"(%[[ET]]) {shape = [1, 32]}
// CHECK-NEXT: func.return %[[M]], %[[CT]], %[[F]]
func.func @shapes(%x: tensor<1x2x4x4xf32>) -> (tensor<1x4xf32>, tensor<1x4x6x6xf32>, tensor<1x32xf32>) {
  %w = "tg.constant"() {value = dense<1.0> : tensor<2x1x3x3xf32>} : () -> tensor<2x1x3x3xf32>
  %y = "tg.conv2d"(%x, %w) {layout = "NCHW", groups = 2, pads = [1, 1, 1, 1]} : (tensor<1x2x4x4xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x4x4xf32>
  %p = "tg.pad"(%y) {pads = [0, 0, 1, 1, 0, 0, 1, 1]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x6x6xf32>
  %c = "tg.concat"(%p, %p) {axis = 1} : (tensor<1x2x6x6xf32>, tensor<1x2x6x6xf32>) -> tensor<1x4x6x6xf32>
  %m = "tg.reduce_mean"(%c) {axes = [2, 3], keepdims = false} : (tensor<1x4x6x6xf32>) -> tensor<1x4xf32>
  %a, %b = "tg.split"(%y) {axis = 1, sizes = [1, 1]} : (tensor<1x2x4x4xf32>) -> (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>)
  %d = "tg.sub"(%a, %b) : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %e = "tg.concat"(%d, %a) {axis = 1} : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %f = "tg.reshape"(%e) {shape = [1, 32]} : (tensor<1x2x4x4xf32>) -> tensor<1x32xf32>
  func.return %m, %c, %f : tensor<1x4xf32>, tensor<1x4x6x6xf32>, tensor<1x32xf32>
}

// A function without an NCHW conv or pool is left alone (its transposes are not moved).
// CHECK-LABEL: func.func @nhwc_only
// CHECK-NEXT: %[[T:.*]] = "tg.transpose"(%arg0) {perm = [0, 3, 1, 2]}
// CHECK-NEXT: %[[R:.*]] = "tg.relu"(%[[T]])
// CHECK-NEXT: func.return %[[R]]
func.func @nhwc_only(%x: tensor<1x2x3x4xf32>) -> tensor<1x4x2x3xf32> {
  %t = "tg.transpose"(%x) {perm = [0, 3, 1, 2]} : (tensor<1x2x3x4xf32>) -> tensor<1x4x2x3xf32>
  %r = "tg.relu"(%t) : (tensor<1x4x2x3xf32>) -> tensor<1x4x2x3xf32>
  func.return %r : tensor<1x4x2x3xf32>
}
