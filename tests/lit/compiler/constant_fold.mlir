// no_bef_translation
// RUN: tfrt_opt -tg-constant-fold %s | FileCheck %s
// RUN: tfrt_opt -tg-constant-fold -tg-dce %s | FileCheck %s --check-prefix=DCE

// Ops on constants become constants, computed by the ops' own compute functions.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2xi64>) {
  %a = "tg.constant"() {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %b = "tg.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  // CHECK: %[[P:.*]] = "tg.constant"() {value = dense<{{\[\[}}2.000000e+00, 4.000000e+00, 6.000000e+00], [8.000000e+00, 1.000000e+01, 1.200000e+01]]> : tensor<2x3xf32>}
  // CHECK-NOT: "tg.mul"
  %p = "tg.mul"(%a, %b) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  // CHECK: %[[N:.*]] = "tg.constant"() {value = dense<[-2.000000e+00, -4.000000e+00, -6.000000e+00, -8.000000e+00, -1.000000e+01, -1.200000e+01]> : tensor<6xf32>}
  %n = "tg.reshape"(%p) {shape = [6]} : (tensor<2x3xf32>) -> tensor<6xf32>
  %m = "tg.neg"(%n) : (tensor<6xf32>) -> tensor<6xf32>
  // The shape of a constant folds too; ops on arguments stay.
  // CHECK: "tg.constant"() {value = dense<[2, 3]> : tensor<2xi64>}
  %s = "tg.shape"(%a) {out_type = "i64"} : (tensor<2x3xf32>) -> tensor<2xi64>
  // CHECK: %[[Y:.*]] = "tg.add"(%arg0, %[[P]])
  %y = "tg.add"(%x, %p) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %y, %s : tensor<2x3xf32>, tensor<2xi64>
}

// After dead-code elimination only the used constants remain.
// DCE-LABEL: func.func @main
// DCE-NEXT: %0 = "tg.constant"() {value = dense<{{\[\[}}2.000000e+00
// DCE-NEXT: %1 = "tg.constant"() {value = dense<[2, 3]> : tensor<2xi64>}
// DCE-NEXT: %2 = "tg.add"(%arg0, %0)
// DCE-NEXT: func.return %2, %1
