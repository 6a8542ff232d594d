// no_bef_translation
// RUN: tfrt_opt -tg-plan-buffers %s | FileCheck %s

// A conv2d's fused residual (its last operand, epilogue_operands = [_, 1]) is read once per
// output element just before that element is written, so the conv may write into the
// residual's slot when this is the residual's last use.  %c1 takes %a's slot 0 (in place);
// %c2's residual %c1 is also read later (by %d), so %c2 gets a fresh slot; %c3's residual is
// its own input %c2, which it reads after writing: no in-place, slot 1 (%b's, free since %d).
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<1x4x4x2xf32>, %w: tensor<1x1x2x2xf32>) -> tensor<1x4x4x2xf32> {
  // CHECK: %[[A:.*]] = "tg.relu"(%arg0) {tg.buffer = [0, 0, 0, 2]}
  %a = "tg.relu"(%x) : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK: %[[B:.*]] = "tg.relu"(%[[A]]) {tg.buffer = [1, 1, 1, 4]}
  %b = "tg.relu"(%a) : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK: %[[C1:.*]] = "tg.conv2d"(%[[B]], %arg1, %[[A]]) {{.*}}tg.buffer = [0, 2, 2, 4]}
  %c1 = "tg.conv2d"(%b, %w, %a) {layout = "NHWC", epilogue_operands = [0, 1]} : (tensor<1x4x4x2xf32>, tensor<1x1x2x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK: %[[C2:.*]] = "tg.conv2d"(%[[B]], %arg1, %[[C1]]) {{.*}}tg.buffer = [2, 3, 3, 5]}
  %c2 = "tg.conv2d"(%b, %w, %c1) {layout = "NHWC", epilogue_operands = [0, 1]} : (tensor<1x4x4x2xf32>, tensor<1x1x2x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK: %[[D:.*]] = "tg.add"(%[[C1]], %[[B]]) {tg.buffer = [0, 4, 4, 6]}
  %d = "tg.add"(%c1, %b) : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK: %[[C3:.*]] = "tg.conv2d"(%[[C2]], %arg1, %[[C2]]) {{.*}}tg.buffer = [1, 5, 5, 6]}
  %c3 = "tg.conv2d"(%c2, %w, %c2) {layout = "NHWC", epilogue_operands = [0, 1]} : (tensor<1x4x4x2xf32>, tensor<1x1x2x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  // CHECK: %[[E:.*]] = "tg.add"(%[[C3]], %[[D]])
  // CHECK-NOT: tg.buffer
  // CHECK: func.return %[[E]]
  %e = "tg.add"(%c3, %d) : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  func.return %e : tensor<1x4x4x2xf32>
}
