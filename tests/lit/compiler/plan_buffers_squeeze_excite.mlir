// no_bef_translation
// RUN: tfrt_opt -tg-plan-buffers %s | FileCheck %s

// A squeeze_excite reads its whole input (the channel means) before its scale writes, and the
// scale reads each element just before writing it: it takes its input's slot when this is
// the input's last use (%s1 writes into %a's slot 0).  %b is read again after %s2 (by %d), so
// %s2 gets a fresh slot.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<1x4x4x2xf32>, %w1: tensor<2x3xf32>, %b1: tensor<3xf32>, %w2: tensor<3x2xf32>, %b2: tensor<2xf32>) -> tensor<1x4x4x2xf32> {
  // CHECK: %[[A:.*]] = "tg.relu"(%arg0) {tg.buffer = [0, 0, 0, 1]}
  %a = "tg.relu"(%x) : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK: %[[S1:.*]] = "tg.squeeze_excite"(%[[A]], {{.*}}tg.buffer = [0, 1, 1, 2]}
  %s1 = "tg.squeeze_excite"(%a, %w1, %b1, %w2, %b2) {layout = "NHWC", activation = "relu", alpha = 0.0 : f64, gate = "sigmoid", gate_alpha = 0.0 : f64, gate_beta = 0.0 : f64} : (tensor<1x4x4x2xf32>, tensor<2x3xf32>, tensor<3xf32>, tensor<3x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK: %[[B:.*]] = "tg.relu"(%[[S1]]) {tg.buffer = [0, 2, 2, 4]}
  %b = "tg.relu"(%s1) : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK: %[[S2:.*]] = "tg.squeeze_excite"(%[[B]], {{.*}}tg.buffer = [1, 3, 3, 4]}
  %s2 = "tg.squeeze_excite"(%b, %w1, %b1, %w2, %b2) {layout = "NHWC", activation = "relu", alpha = 0.0 : f64, gate = "sigmoid", gate_alpha = 0.0 : f64, gate_beta = 0.0 : f64} : (tensor<1x4x4x2xf32>, tensor<2x3xf32>, tensor<3xf32>, tensor<3x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK: "tg.add"(%[[S2]], %[[B]])
  %d = "tg.add"(%s2, %b) : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  func.return %d : tensor<1x4x4x2xf32>
}
