// no_bef_translation
// RUN: tfrt_opt -tg-default-pipeline -tg-print-after-all %s 2>&1 | FileCheck %s

// Every stage is printed; the end result is one fused dense layer and one fused region.
// CHECK: // -----// IR Dump After tg-infer-shapes //----- //
// CHECK: "tg.matmul"(%arg0, %0) {transpose_a = false, transpose_b = false} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
// CHECK: // -----// IR Dump After tg-constant-fold //----- //
// CHECK: // -----// IR Dump After tg-dce //----- //
// CHECK: // -----// IR Dump After tg-fold-batch-norm //----- //
// CHECK: // -----// IR Dump After tg-fuse-epilogue //----- //
// CHECK: "tg.matmul"(%arg0, %{{.*}}, %{{.*}}) {activation = "tanh", epilogue_operands = [1, 0]
// CHECK: // -----// IR Dump After tg-fuse-elementwise //----- //
// CHECK: "tg.fused_elementwise"
// CHECK: // -----// IR Dump After tg-dce //----- //
// CHECK: module {
// The final module (stdout, after the dumps):
// CHECK: module {
// CHECK-NEXT: func.func @main(%arg0: tensor<?x2xf32>) -> tensor<?x2xf32>
// CHECK-NEXT: %0 = "tg.constant"() {value = dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>}
// CHECK-NEXT: %1 = "tg.constant"() {value = dense<[2.000000e+00, 3.000000e+00]> : tensor<2xf32>}
// CHECK-NEXT: %2 = "tg.matmul"(%arg0, %0, %1) {activation = "tanh"
// CHECK-NEXT: %3 = "tg.fused_elementwise"(%2) ({
// CHECK: "tg.exp"
// CHECK-NEXT: "tg.neg"
// CHECK-NEXT: "tg.yield"
// CHECK: func.return %3 : tensor<?x2xf32>
func.func @main(%x: tensor<?x2xf32>) -> tensor<*xf32> {
  %w = "tg.constant"() {value = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %one = "tg.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %b = "tg.add"(%one, %one) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %b2 = "tg.add"(%b, %one) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %c = "tg.constant"() {value = dense<[2.0, 3.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %y = "tg.matmul"(%x, %w) {transpose_a = false, transpose_b = false} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<*xf32>
  %z = "tg.add"(%y, %c) : (tensor<*xf32>, tensor<2xf32>) -> tensor<*xf32>
  %t = "tg.tanh"(%z) : (tensor<*xf32>) -> tensor<*xf32>
  %e = "tg.exp"(%t) : (tensor<*xf32>) -> tensor<*xf32>
  %n = "tg.neg"(%e) : (tensor<*xf32>) -> tensor<*xf32>
  func.return %n : tensor<*xf32>
}
