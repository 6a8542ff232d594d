// no_bef_translation
// RUN: tfrt_opt -tg-fuse-add-layer-norm %s | FileCheck %s

// GPT-2's running sum: the residual add feeds the next layer norm and the next residual add;
// one op makes both (the sum's other user reads its first result).
// CHECK-LABEL: func.func @pre_norm
func.func @pre_norm(%h: tensor<?x?x8xf32>, %f: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %s = "tg.add"(%h, %f) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %g = "tg.constant"() {value = dense<2.0> : tensor<8xf32>} : () -> tensor<8xf32>
  %b = "tg.constant"() {value = dense<0.5> : tensor<8xf32>} : () -> tensor<8xf32>
  // CHECK-NOT: "tg.add"
  // CHECK: %[[G:.*]] = "tg.constant"() {value = dense<2.000000e+00> : tensor<8xf32>}
  // CHECK-NEXT: %[[B:.*]] = "tg.constant"()
  // CHECK-NEXT: %[[F:.*]]:2 = "tg.add_layer_norm"(%arg0, %arg1, %[[G]], %[[B]]) {axis = 2, epsilon = 1.000000e-05, has_beta = true, has_gamma = true} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  // CHECK-NOT: "tg.layer_norm"
  // CHECK: %[[R:.*]] = "tg.add"(%[[F]]#0, %[[F]]#1)
  // CHECK-NEXT: func.return %[[R]], %[[F]]#0
  %y = "tg.layer_norm"(%s, %g, %b) {axis = 2, epsilon = 1.0e-05} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %r = "tg.add"(%s, %y) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  func.return %r, %s : tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

// The embedding sum (a broadcast position row) without gamma: fused, the broadcast kept.
// CHECK-LABEL: func.func @broadcast_no_gamma
func.func @broadcast_no_gamma(%t: tensor<?x?x8xf32>, %p: tensor<1x?x8xf32>) -> tensor<?x?x8xf32> {
  %s = "tg.add"(%t, %p) : (tensor<?x?x8xf32>, tensor<1x?x8xf32>) -> tensor<?x?x8xf32>
  %b = "tg.constant"() {value = dense<0.5> : tensor<8xf32>} : () -> tensor<8xf32>
  // CHECK: "tg.add_layer_norm"(%arg0, %arg1, %{{.*}}) {axis = -1, {{.*}}has_gamma = false} : (tensor<?x?x8xf32>, tensor<1x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  %y = "tg.layer_norm"(%s, %b) {axis = -1, has_gamma = false} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  func.return %y : tensor<?x?x8xf32>
}

// Not fused: the sum is used before the layer norm (the fused op would come too late), and an
// integer add.
// CHECK-LABEL: func.func @kept
func.func @kept(%a: tensor<2x8xf32>, %b: tensor<2x8xf32>, %i: tensor<2x8xi32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xi32>) {
  %s = "tg.add"(%a, %b) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %e = "tg.exp"(%s) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = "tg.layer_norm"(%s) {has_gamma = false, has_beta = false} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %j = "tg.add"(%i, %i) : (tensor<2x8xi32>, tensor<2x8xi32>) -> tensor<2x8xi32>
  // CHECK: "tg.add"(%arg0, %arg1)
  // CHECK: "tg.exp"
  // CHECK: "tg.layer_norm"
  // CHECK: "tg.add"(%arg2, %arg2)
  // CHECK-NOT: tg.add_layer_norm
  func.return %e, %y, %j : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xi32>
}
