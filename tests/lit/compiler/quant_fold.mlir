// no_bef_translation
// RUN: tfrt_opt -tg-fold-quant -tg-dce %s | FileCheck %s

// DQ -> conv (per-channel s8 weight) -> bias add -> relu -> Q: one qconv2d with u8 result.
// CHECK-LABEL: func.func @conv
func.func @conv(%x: tensor<1x2x4x4xui8>) -> tensor<1x3x4x4xui8> {
  %xs = "tg.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %xz = "tg.constant"() {value = dense<128> : tensor<ui8>} : () -> tensor<ui8>
  %wq = "tg.constant"() {value = dense<3> : tensor<3x2x1x1xi8>} : () -> tensor<3x2x1x1xi8>
  %ws = "tg.constant"() {value = dense<[0.1, 0.2, 0.3]> : tensor<3xf32>} : () -> tensor<3xf32>
  %b = "tg.constant"() {value = dense<[[[1.0]], [[2.0]], [[3.0]]]> : tensor<3x1x1xf32>} : () -> tensor<3x1x1xf32>
  %ys = "tg.constant"() {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %yz = "tg.constant"() {value = dense<0> : tensor<ui8>} : () -> tensor<ui8>
  %xd = "tg.dequantize_linear"(%x, %xs, %xz) : (tensor<1x2x4x4xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x2x4x4xf32>
  %wd = "tg.dequantize_linear"(%wq, %ws) {axis = 0} : (tensor<3x2x1x1xi8>, tensor<3xf32>) -> tensor<3x2x1x1xf32>
  %c = "tg.conv2d"(%xd, %wd) {layout = "NCHW"} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %a = "tg.add"(%c, %b) : (tensor<1x3x4x4xf32>, tensor<3x1x1xf32>) -> tensor<1x3x4x4xf32>
  %r = "tg.relu"(%a) : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = "tg.quantize_linear"(%r, %ys, %yz) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x3x4x4xui8>
  // CHECK-NOT: tg.dequantize_linear
  // CHECK: %[[W:.*]] = "tg.constant"() {value = dense<3> : tensor<3x2x1x1xi8>}
  // CHECK: %[[S:.*]] = "tg.constant"() {value = dense<[1.000000e-01, 2.000000e-01, 3.000000e-01]> : tensor<3xf32>}
  // CHECK: %[[B:.*]] = "tg.constant"() {value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>}
  // CHECK: %[[Q:.*]] = "tg.qconv2d"(%arg0, %[[W]], %[[S]], %[[B]]) {activation = "relu", {{.*}}dtype = "ui8", epilogue_operands = [1, 0], {{.*}}layout = "NCHW", {{.*}}x_dtype = "ui8", x_scale = 5.000000e-01, x_zero_point = 128, y_scale = 2.500000e-01, y_zero_point = 0}
  // CHECK-NOT: tg.quantize_linear
  // CHECK: func.return %[[Q]]
  func.return %y : tensor<1x3x4x4xui8>
}

// DQ -> matmul (transpose_b, per-tensor weight scale), no Q after: a qmatmul with f32 result.
// CHECK-LABEL: func.func @dense
func.func @dense(%x: tensor<?x3xi8>) -> tensor<?x2xf32> {
  %xs = "tg.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %wq = "tg.constant"() {value = dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi8>} : () -> tensor<2x3xi8>
  %ws = "tg.constant"() {value = dense<0.125> : tensor<f32>} : () -> tensor<f32>
  %xd = "tg.dequantize_linear"(%x, %xs) : (tensor<?x3xi8>, tensor<f32>) -> tensor<?x3xf32>
  %wd = "tg.dequantize_linear"(%wq, %ws) : (tensor<2x3xi8>, tensor<f32>) -> tensor<2x3xf32>
  %y = "tg.matmul"(%xd, %wd) {transpose_a = false, transpose_b = true} : (tensor<?x3xf32>, tensor<2x3xf32>) -> tensor<?x2xf32>
  // CHECK: %[[W:.*]] = "tg.constant"() {value = dense<{{\[\[}}1, 4], [2, 5], [3, 6]]> : tensor<3x2xi8>}
  // CHECK: %[[Q:.*]] = "tg.qmatmul"(%arg0, %[[W]], %{{.*}}) {dtype = "f32", {{.*}}x_dtype = "i8", x_scale = 5.000000e-01, x_zero_point = 0,
  // CHECK-NEXT: func.return %[[Q]]
  func.return %y : tensor<?x2xf32>
}

// A weight with a non-zero zero point is not folded (the float graph stays).
// CHECK-LABEL: func.func @asymmetric_weight
func.func @asymmetric_weight(%x: tensor<?x3xui8>) -> tensor<?x2xf32> {
  %xs = "tg.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %wq = "tg.constant"() {value = dense<1> : tensor<3x2xi8>} : () -> tensor<3x2xi8>
  %ws = "tg.constant"() {value = dense<0.125> : tensor<f32>} : () -> tensor<f32>
  %wz = "tg.constant"() {value = dense<1> : tensor<i8>} : () -> tensor<i8>
  %xd = "tg.dequantize_linear"(%x, %xs) : (tensor<?x3xui8>, tensor<f32>) -> tensor<?x3xf32>
  %wd = "tg.dequantize_linear"(%wq, %ws, %wz) : (tensor<3x2xi8>, tensor<f32>, tensor<i8>) -> tensor<3x2xf32>
  %y = "tg.matmul"(%xd, %wd) {transpose_a = false, transpose_b = false} : (tensor<?x3xf32>, tensor<3x2xf32>) -> tensor<?x2xf32>
  // CHECK-NOT: tg.qmatmul
  // CHECK: "tg.matmul"
  func.return %y : tensor<?x2xf32>
}

// A residual block tail: quantize(relu(dequantize(qconv) + dequantize(skip))) becomes the
// convolution's residual (sum post-op); its own requantization is kept as inner_scale.
// CHECK-LABEL: func.func @residual
func.func @residual(%x: tensor<1x2x4x4xui8>, %skip: tensor<1x3x4x4xui8>) -> tensor<1x3x4x4xui8> {
  %xs = "tg.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %xz = "tg.constant"() {value = dense<128> : tensor<ui8>} : () -> tensor<ui8>
  %wq = "tg.constant"() {value = dense<3> : tensor<3x2x1x1xi8>} : () -> tensor<3x2x1x1xi8>
  %ws = "tg.constant"() {value = dense<0.1> : tensor<f32>} : () -> tensor<f32>
  %cs = "tg.constant"() {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %cz = "tg.constant"() {value = dense<10> : tensor<ui8>} : () -> tensor<ui8>
  %ss = "tg.constant"() {value = dense<0.125> : tensor<f32>} : () -> tensor<f32>
  %sz = "tg.constant"() {value = dense<3> : tensor<ui8>} : () -> tensor<ui8>
  %ys = "tg.constant"() {value = dense<0.375> : tensor<f32>} : () -> tensor<f32>
  %yz = "tg.constant"() {value = dense<0> : tensor<ui8>} : () -> tensor<ui8>
  %xd = "tg.dequantize_linear"(%x, %xs, %xz) : (tensor<1x2x4x4xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x2x4x4xf32>
  %wd = "tg.dequantize_linear"(%wq, %ws) : (tensor<3x2x1x1xi8>, tensor<f32>) -> tensor<3x2x1x1xf32>
  %c = "tg.conv2d"(%xd, %wd) {layout = "NCHW"} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %cq = "tg.quantize_linear"(%c, %cs, %cz) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x3x4x4xui8>
  %cd = "tg.dequantize_linear"(%cq, %cs, %cz) : (tensor<1x3x4x4xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x3x4x4xf32>
  %sd = "tg.dequantize_linear"(%skip, %ss, %sz) : (tensor<1x3x4x4xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x3x4x4xf32>
  %a = "tg.add"(%sd, %cd) : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %r = "tg.relu"(%a) : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = "tg.quantize_linear"(%r, %ys, %yz) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x3x4x4xui8>
  // CHECK: %[[Q:.*]] = "tg.qconv2d"(%arg0, %{{.*}}, %{{.*}}, %arg1) {activation = "relu", {{.*}}epilogue_operands = [0, 1], {{.*}}inner_scale = 2.500000e-01, inner_zero_point = 10, {{.*}}residual_scale = 1.250000e-01, residual_zero_point = 3, {{.*}}y_scale = 3.750000e-01, y_zero_point = 0}
  // CHECK-NEXT: func.return %[[Q]]
  func.return %y : tensor<1x3x4x4xui8>
}

// Max pooling between a dequantize and a quantize with the same parameters runs on the u8
// values (exact); with other parameters the float pooling stays.
// CHECK-LABEL: func.func @maxpool
func.func @maxpool(%x: tensor<1x4x4x2xui8>) -> (tensor<1x2x2x2xui8>, tensor<1x2x2x2xui8>) {
  %s = "tg.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %z = "tg.constant"() {value = dense<7> : tensor<ui8>} : () -> tensor<ui8>
  %s2 = "tg.constant"() {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %d = "tg.dequantize_linear"(%x, %s, %z) : (tensor<1x4x4x2xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x4x4x2xf32>
  %p = "tg.max_pool2d"(%d) {layout = "NHWC", ksize = [2, 2], strides = [2, 2]} : (tensor<1x4x4x2xf32>) -> tensor<1x2x2x2xf32>
  %q = "tg.quantize_linear"(%p, %s, %z) : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x2x2x2xui8>
  %p2 = "tg.max_pool2d"(%d) {layout = "NHWC", ksize = [2, 2], strides = [2, 2]} : (tensor<1x4x4x2xf32>) -> tensor<1x2x2x2xf32>
  %q2 = "tg.quantize_linear"(%p2, %s2, %z) : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x2x2x2xui8>
  // CHECK: %[[P:.*]] = "tg.max_pool2d"(%arg0) {{.*}}: (tensor<1x4x4x2xui8>) -> tensor<1x2x2x2xui8>
  // CHECK: "tg.max_pool2d"(%{{.*}}) {{.*}}: (tensor<1x4x4x2xf32>) -> tensor<1x2x2x2xf32>
  // CHECK: %[[Q2:.*]] = "tg.quantize_linear"
  // CHECK: func.return %[[P]], %[[Q2]]
  func.return %q, %q2 : tensor<1x2x2x2xui8>, tensor<1x2x2x2xui8>
}

// A classifier head: quantize(global_avg_pool(dequantize)) becomes qglobal_avg_pool on the
// codes (the input's and the result's parameters as attributes), and quantize(reshape(
// dequantize)) with equal parameters becomes a reshape of the codes, so the int8 matmul
// reads them directly.
// CHECK-LABEL: func.func @head
func.func @head(%x: tensor<?x2x3x3xui8>) -> tensor<?x2xui8> {
  %s = "tg.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %z = "tg.constant"() {value = dense<7> : tensor<ui8>} : () -> tensor<ui8>
  %s2 = "tg.constant"() {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %z2 = "tg.constant"() {value = dense<3> : tensor<ui8>} : () -> tensor<ui8>
  %d = "tg.dequantize_linear"(%x, %s, %z) : (tensor<?x2x3x3xui8>, tensor<f32>, tensor<ui8>) -> tensor<?x2x3x3xf32>
  %g = "tg.global_avg_pool"(%d) {layout = "NCHW"} : (tensor<?x2x3x3xf32>) -> tensor<?x2x1x1xf32>
  %gq = "tg.quantize_linear"(%g, %s2, %z2) : (tensor<?x2x1x1xf32>, tensor<f32>, tensor<ui8>) -> tensor<?x2x1x1xui8>
  %gd = "tg.dequantize_linear"(%gq, %s2, %z2) : (tensor<?x2x1x1xui8>, tensor<f32>, tensor<ui8>) -> tensor<?x2x1x1xf32>
  %r = "tg.reshape"(%gd) {shape = [-1, 2]} : (tensor<?x2x1x1xf32>) -> tensor<?x2xf32>
  %y = "tg.quantize_linear"(%r, %s2, %z2) : (tensor<?x2xf32>, tensor<f32>, tensor<ui8>) -> tensor<?x2xui8>
  // CHECK: %[[G:.*]] = "tg.qglobal_avg_pool"(%arg0) {dtype = "ui8", layout = "NCHW", x_scale = 5.000000e-01, x_zero_point = 7, y_scale = 2.500000e-01, y_zero_point = 3} : (tensor<?x2x3x3xui8>) -> tensor<?x2x1x1xui8>
  // CHECK-NEXT: %[[R:.*]] = "tg.reshape"(%[[G]]) {shape = [-1, 2]} : (tensor<?x2x1x1xui8>) -> tensor<?x2xui8>
  // CHECK-NEXT: func.return %[[R]]
  func.return %y : tensor<?x2xui8>
}
