// no_bef_translation
// RUN: tfrt_opt -tg-fuse-small-graph %s | FileCheck %s

// A run of ops with small static shapes becomes one region (a constant in between does not
// end it); its results are the values used after it.  An op the region kernel does not run
// (softmax) ends the run; a run of one op is left alone.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<4x2xf32>, %w: tensor<2x3xf32>) -> (tensor<3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
  // CHECK: %0 = "tg.constant"() {value = dense<5.000000e-01> : tensor<3xf32>}
  // CHECK-NEXT: %1:2 = "tg.fused_graph"(%arg0, %arg1, %0) ({
  // CHECK-NEXT: ^bb0(%arg2: tensor<4x2xf32>, %arg3: tensor<2x3xf32>, %arg4: tensor<3xf32>):
  // CHECK-NEXT: %[[Y:.*]] = "tg.matmul"(%arg2, %arg3) {transpose_a = false, transpose_b = false}
  // CHECK-NEXT: %[[Z:.*]] = "tg.add"(%[[Y]], %arg4)
  // CHECK-NEXT: %[[S:.*]] = "tg.sigmoid"(%[[Z]])
  // CHECK-NEXT: %[[R:.*]] = "tg.reduce_sum"(%[[S]]) {axes = [0], keepdims = false}
  // CHECK-NEXT: "tg.yield"(%[[S]], %[[R]]) : (tensor<4x3xf32>, tensor<3xf32>) -> ()
  // CHECK-NEXT: }) : (tensor<4x2xf32>, tensor<2x3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>)
  %y = "tg.matmul"(%x, %w) {transpose_a = false, transpose_b = false} : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %b = "tg.constant"() {value = dense<0.5> : tensor<3xf32>} : () -> tensor<3xf32>
  %z = "tg.add"(%y, %b) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %s = "tg.sigmoid"(%z) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %r = "tg.reduce_sum"(%s) {axes = [0], keepdims = false} : (tensor<4x3xf32>) -> tensor<3xf32>
  // CHECK-NEXT: %[[SM:.*]] = "tg.softmax"(%1#0) {axis = 1}
  // CHECK-NEXT: %[[E:.*]] = "tg.exp"(%[[SM]])
  // CHECK-NEXT: func.return %1#1, %[[SM]], %[[E]]
  %sm = "tg.softmax"(%s) {axis = 1} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %e = "tg.exp"(%sm) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  func.return %r, %sm, %e : tensor<3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
}

// Dynamic shapes stay on the per-op kernels.
// CHECK-LABEL: func.func @dynamic
// CHECK-NOT: tg.fused_graph
// CHECK: func.return
func.func @dynamic(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %a = "tg.exp"(%x) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %b = "tg.neg"(%a) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  func.return %b : tensor<?x2xf32>
}

// A matmul above MAX_MATMUL multiply-adds (BLAS wins there) ends a run.
// CHECK-LABEL: func.func @big
// CHECK-NEXT: "tg.matmul"
// CHECK-NEXT: "tg.relu"
// CHECK-NEXT: func.return
func.func @big(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %y = "tg.matmul"(%x, %w) {transpose_a = false, transpose_b = false} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %r = "tg.relu"(%y) : (tensor<64x64xf32>) -> tensor<64x64xf32>
  func.return %r : tensor<64x64xf32>
}
