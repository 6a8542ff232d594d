// no_bef_translation
// RUN: tfrt_opt -tg-fuse-elementwise %s | FileCheck %s

// A chain of float elementwise ops becomes one region; an op with a second user ends it.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<?x8xf32>, %y: tensor<8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %c = "tg.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  // CHECK: %[[A:.*]] = "tg.fused_elementwise"(%arg0, %arg1, %0) ({
  // CHECK-NEXT: ^bb0(%arg2: tensor<?x8xf32>, %arg3: tensor<8xf32>, %arg4: tensor<f32>):
  // CHECK-NEXT: %[[S:.*]] = "tg.sub"(%arg2, %arg3)
  // CHECK-NEXT: %[[M:.*]] = "tg.mul"(%[[S]], %arg4)
  // CHECK-NEXT: %[[T:.*]] = "tg.tanh"(%[[M]])
  // CHECK-NEXT: "tg.yield"(%[[T]])
  // CHECK-NEXT: }) : (tensor<?x8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<?x8xf32>
  %s = "tg.sub"(%x, %y) : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %m = "tg.mul"(%s, %c) : (tensor<?x8xf32>, tensor<f32>) -> tensor<?x8xf32>
  %t = "tg.tanh"(%m) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  // %t has two users: the next region starts after it.
  // CHECK: %[[B:.*]] = "tg.fused_elementwise"(%[[A]]) ({
  // CHECK: "tg.exp"
  // CHECK-NEXT: "tg.leaky_relu"({{.*}}) {alpha = 1.000000e-01}
  // CHECK-NEXT: "tg.yield"
  %e = "tg.exp"(%t) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %l = "tg.leaky_relu"(%e) {alpha = 0.1} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  // CHECK: %[[D:.*]] = "tg.div"(%[[A]], %[[B]])
  %d = "tg.div"(%t, %l) : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  // CHECK: func.return %[[D]], %[[B]]
  func.return %d, %l : tensor<?x8xf32>, tensor<?x8xf32>
}
