// no_bef_translation
// RUN: tfrt_opt -tg-fuse-layer-norm-grad %s | FileCheck %s

// Keras' LayerNormalization (epsilon 1e-4, width 7) under tf.GradientTape, as imported and
// after -tg-fold-reshapes: the forward's moments/rsqrt/scale, then the gradient for dy.  With
// no other reader the forward pieces go too.
// CHECK-LABEL: func.func @keras
func.func @keras(%x: tensor<?x3x7xf32>, %dy: tensor<?x3x7xf32>, %gamma: tensor<7xf32>) -> (tensor<?x3x7xf32>, tensor<7xf32>, tensor<7xf32>) {
  // CHECK: %[[R:.*]]:3 = "tg.layer_norm_grad"(%arg1, %arg0, %arg2) {axis = 2{{( : i64)?}}, epsilon = 9.99999974{{.*}}} : (tensor<?x3x7xf32>, tensor<?x3x7xf32>, tensor<7xf32>) -> (tensor<?x3x7xf32>, tensor<7xf32>, tensor<7xf32>)
  // CHECK-NOT: "tg.reduce_sum"
  // CHECK-NOT: "tg.broadcast_to"
  // CHECK-NOT: "tg.square"
  // CHECK: func.return %[[R]]#0, %[[R]]#1, %[[R]]#2
  %0:2 = "tg.moments"(%x) {axes = [2], keepdims = true} : (tensor<?x3x7xf32>) -> (tensor<?x3x1xf32>, tensor<?x3x1xf32>)
  %1 = "tg.constant"() {value = dense<1.000000e-04> : tensor<f32>} : () -> tensor<f32>
  %2 = "tg.add"(%0#1, %1) : (tensor<?x3x1xf32>, tensor<f32>) -> tensor<?x3x1xf32>
  %3 = "tg.rsqrt"(%2) : (tensor<?x3x1xf32>) -> tensor<?x3x1xf32>
  %4 = "tg.reshape"(%gamma) {shape = [1, 1, 7]} : (tensor<7xf32>) -> tensor<1x1x7xf32>
  %5 = "tg.mul"(%3, %4) : (tensor<?x3x1xf32>, tensor<1x1x7xf32>) -> tensor<?x3x7xf32>
  %6 = "tg.neg"(%0#0) : (tensor<?x3x1xf32>) -> tensor<?x3x1xf32>
  %18 = "tg.mul"(%dy, %5) : (tensor<?x3x7xf32>, tensor<?x3x7xf32>) -> tensor<?x3x7xf32>
  %19 = "tg.mul"(%x, %dy) : (tensor<?x3x7xf32>, tensor<?x3x7xf32>) -> tensor<?x3x7xf32>
  %20 = "tg.reduce_sum"(%dy) {axes = [0, 1], keepdims = true} : (tensor<?x3x7xf32>) -> tensor<1x1x7xf32>
  %21 = "tg.mul"(%6, %dy) : (tensor<?x3x1xf32>, tensor<?x3x7xf32>) -> tensor<?x3x7xf32>
  %22 = "tg.reduce_sum"(%18) {axes = [2], keepdims = true} : (tensor<?x3x7xf32>) -> tensor<?x3x1xf32>
  %23 = "tg.reshape"(%20) {shape = [7]} : (tensor<1x1x7xf32>) -> tensor<7xf32>
  %24 = "tg.neg"(%22) : (tensor<?x3x1xf32>) -> tensor<?x3x1xf32>
  %25 = "tg.add"(%19, %21) : (tensor<?x3x7xf32>, tensor<?x3x7xf32>) -> tensor<?x3x7xf32>
  %26 = "tg.mul"(%25, %4) : (tensor<?x3x7xf32>, tensor<1x1x7xf32>) -> tensor<?x3x7xf32>
  %27 = "tg.mul"(%3, %25) : (tensor<?x3x1xf32>, tensor<?x3x7xf32>) -> tensor<?x3x7xf32>
  %28 = "tg.reduce_sum"(%26) {axes = [2], keepdims = true} : (tensor<?x3x7xf32>) -> tensor<?x3x1xf32>
  %29 = "tg.reduce_sum"(%27) {axes = [0, 1], keepdims = true} : (tensor<?x3x7xf32>) -> tensor<1x1x7xf32>
  %30 = "tg.shape"(%x) {out_type = "i32"} : (tensor<?x3x7xf32>) -> tensor<3xi32>
  %31 = "tg.cast"(%30) {to = "i64"} : (tensor<3xi32>) -> tensor<3xi64>
  %32 = "tg.constant"() {value = dense<7.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %33 = "tg.div"(%24, %32) : (tensor<?x3x1xf32>, tensor<f32>) -> tensor<?x3x1xf32>
  %34 = "tg.broadcast_to"(%33, %31) : (tensor<?x3x1xf32>, tensor<3xi64>) -> tensor<?x3x?xf32>
  %35 = "tg.square"(%3) : (tensor<?x3x1xf32>) -> tensor<?x3x1xf32>
  %36 = "tg.mul"(%35, %3) : (tensor<?x3x1xf32>, tensor<?x3x1xf32>) -> tensor<?x3x1xf32>
  %37 = "tg.mul"(%28, %36) : (tensor<?x3x1xf32>, tensor<?x3x1xf32>) -> tensor<?x3x1xf32>
  %38 = "tg.constant"() {value = dense<-5.000000e-01> : tensor<f32>} : () -> tensor<f32>
  %39 = "tg.mul"(%37, %38) : (tensor<?x3x1xf32>, tensor<f32>) -> tensor<?x3x1xf32>
  %40 = "tg.reshape"(%29) {shape = [7]} : (tensor<1x1x7xf32>) -> tensor<7xf32>
  %41 = "tg.shape"(%x) {out_type = "i32"} : (tensor<?x3x7xf32>) -> tensor<3xi32>
  %42 = "tg.cast"(%41) {to = "i64"} : (tensor<3xi32>) -> tensor<3xi64>
  %43 = "tg.div"(%39, %32) : (tensor<?x3x1xf32>, tensor<f32>) -> tensor<?x3x1xf32>
  %44 = "tg.constant"() {value = dense<2.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %45 = "tg.mul"(%44, %43) : (tensor<f32>, tensor<?x3x1xf32>) -> tensor<?x3x1xf32>
  %46 = "tg.broadcast_to"(%45, %42) : (tensor<?x3x1xf32>, tensor<3xi64>) -> tensor<?x3x?xf32>
  %47 = "tg.sub"(%x, %0#0) : (tensor<?x3x7xf32>, tensor<?x3x1xf32>) -> tensor<?x3x7xf32>
  %48 = "tg.mul"(%46, %47) : (tensor<?x3x?xf32>, tensor<?x3x7xf32>) -> tensor<?x3x7xf32>
  %49 = "tg.add"(%18, %34) : (tensor<?x3x7xf32>, tensor<?x3x?xf32>) -> tensor<?x3x7xf32>
  %50 = "tg.add"(%49, %48) : (tensor<?x3x7xf32>, tensor<?x3x7xf32>) -> tensor<?x3x7xf32>
  func.return %50, %40, %23 : tensor<?x3x7xf32>, tensor<7xf32>, tensor<7xf32>
}

// Kept: nothing sums dy over the rows (no dbeta), so the three results are not all there.
// CHECK-LABEL: func.func @kept
func.func @kept(%x: tensor<?x3x7xf32>, %dy: tensor<?x3x7xf32>, %gamma: tensor<7xf32>) -> (tensor<?x3x7xf32>, tensor<7xf32>) {
  // CHECK-NOT: "tg.layer_norm_grad"
  // CHECK: "tg.broadcast_to"
  %0:2 = "tg.moments"(%x) {axes = [2], keepdims = true} : (tensor<?x3x7xf32>) -> (tensor<?x3x1xf32>, tensor<?x3x1xf32>)
  %1 = "tg.constant"() {value = dense<1.000000e-04> : tensor<f32>} : () -> tensor<f32>
  %2 = "tg.add"(%0#1, %1) : (tensor<?x3x1xf32>, tensor<f32>) -> tensor<?x3x1xf32>
  %3 = "tg.rsqrt"(%2) : (tensor<?x3x1xf32>) -> tensor<?x3x1xf32>
  %4 = "tg.reshape"(%gamma) {shape = [1, 1, 7]} : (tensor<7xf32>) -> tensor<1x1x7xf32>
  %5 = "tg.mul"(%3, %4) : (tensor<?x3x1xf32>, tensor<1x1x7xf32>) -> tensor<?x3x7xf32>
  %6 = "tg.neg"(%0#0) : (tensor<?x3x1xf32>) -> tensor<?x3x1xf32>
  %18 = "tg.mul"(%dy, %5) : (tensor<?x3x7xf32>, tensor<?x3x7xf32>) -> tensor<?x3x7xf32>
  %19 = "tg.mul"(%x, %dy) : (tensor<?x3x7xf32>, tensor<?x3x7xf32>) -> tensor<?x3x7xf32>
  %21 = "tg.mul"(%6, %dy) : (tensor<?x3x1xf32>, tensor<?x3x7xf32>) -> tensor<?x3x7xf32>
  %22 = "tg.reduce_sum"(%18) {axes = [2], keepdims = true} : (tensor<?x3x7xf32>) -> tensor<?x3x1xf32>
  %24 = "tg.neg"(%22) : (tensor<?x3x1xf32>) -> tensor<?x3x1xf32>
  %25 = "tg.add"(%19, %21) : (tensor<?x3x7xf32>, tensor<?x3x7xf32>) -> tensor<?x3x7xf32>
  %26 = "tg.mul"(%25, %4) : (tensor<?x3x7xf32>, tensor<1x1x7xf32>) -> tensor<?x3x7xf32>
  %27 = "tg.mul"(%3, %25) : (tensor<?x3x1xf32>, tensor<?x3x7xf32>) -> tensor<?x3x7xf32>
  %28 = "tg.reduce_sum"(%26) {axes = [2], keepdims = true} : (tensor<?x3x7xf32>) -> tensor<?x3x1xf32>
  %29 = "tg.reduce_sum"(%27) {axes = [0, 1], keepdims = true} : (tensor<?x3x7xf32>) -> tensor<1x1x7xf32>
  %30 = "tg.shape"(%x) {out_type = "i32"} : (tensor<?x3x7xf32>) -> tensor<3xi32>
  %31 = "tg.cast"(%30) {to = "i64"} : (tensor<3xi32>) -> tensor<3xi64>
  %32 = "tg.constant"() {value = dense<7.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %33 = "tg.div"(%24, %32) : (tensor<?x3x1xf32>, tensor<f32>) -> tensor<?x3x1xf32>
  %34 = "tg.broadcast_to"(%33, %31) : (tensor<?x3x1xf32>, tensor<3xi64>) -> tensor<?x3x?xf32>
  %35 = "tg.square"(%3) : (tensor<?x3x1xf32>) -> tensor<?x3x1xf32>
  %36 = "tg.mul"(%35, %3) : (tensor<?x3x1xf32>, tensor<?x3x1xf32>) -> tensor<?x3x1xf32>
  %37 = "tg.mul"(%28, %36) : (tensor<?x3x1xf32>, tensor<?x3x1xf32>) -> tensor<?x3x1xf32>
  %38 = "tg.constant"() {value = dense<-5.000000e-01> : tensor<f32>} : () -> tensor<f32>
  %39 = "tg.mul"(%37, %38) : (tensor<?x3x1xf32>, tensor<f32>) -> tensor<?x3x1xf32>
  %40 = "tg.reshape"(%29) {shape = [7]} : (tensor<1x1x7xf32>) -> tensor<7xf32>
  %41 = "tg.shape"(%x) {out_type = "i32"} : (tensor<?x3x7xf32>) -> tensor<3xi32>
  %42 = "tg.cast"(%41) {to = "i64"} : (tensor<3xi32>) -> tensor<3xi64>
  %43 = "tg.div"(%39, %32) : (tensor<?x3x1xf32>, tensor<f32>) -> tensor<?x3x1xf32>
  %44 = "tg.constant"() {value = dense<2.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %45 = "tg.mul"(%44, %43) : (tensor<f32>, tensor<?x3x1xf32>) -> tensor<?x3x1xf32>
  %46 = "tg.broadcast_to"(%45, %42) : (tensor<?x3x1xf32>, tensor<3xi64>) -> tensor<?x3x?xf32>
  %47 = "tg.sub"(%x, %0#0) : (tensor<?x3x7xf32>, tensor<?x3x1xf32>) -> tensor<?x3x7xf32>
  %48 = "tg.mul"(%46, %47) : (tensor<?x3x?xf32>, tensor<?x3x7xf32>) -> tensor<?x3x7xf32>
  %49 = "tg.add"(%18, %34) : (tensor<?x3x7xf32>, tensor<?x3x?xf32>) -> tensor<?x3x7xf32>
  %50 = "tg.add"(%49, %48) : (tensor<?x3x7xf32>, tensor<?x3x7xf32>) -> tensor<?x3x7xf32>
  func.return %50, %40 : tensor<?x3x7xf32>, tensor<7xf32>
}
