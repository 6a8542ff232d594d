// no_bef_translation
// RUN: tfrt_opt -tg-shape-plans -tg-dce %s | FileCheck %s

// A reshape target computed from the input's shape at run time (an exported Transformer's
// heads split): the shape ops move into one tg.shape_plan keyed by %x's shape; the small
// constant they read is copied into its region.  A second target, computed from the shape of
// a value made later (%y), is another plan, inserted after %y exists.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<?x?x8xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?xf32>) {
  %s = "tg.shape"(%x) {out_type = "i64"} : (tensor<?x?x8xf32>) -> tensor<3xi64>
  %i0 = "tg.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %i1 = "tg.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %b = "tg.gather"(%s, %i0) {axis = 0 : i64, batch_dims = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %t = "tg.gather"(%s, %i1) {axis = 0 : i64, batch_dims = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %eb = "tg.expand_dims"(%b) {axis = 0 : i64} : (tensor<i64>) -> tensor<1xi64>
  %et = "tg.expand_dims"(%t) {axis = 0 : i64} : (tensor<i64>) -> tensor<1xi64>
  %hd = "tg.constant"() {value = dense<[2, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %v = "tg.concat"(%eb, %et, %hd) {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<2xi64>) -> tensor<4xi64>
  // CHECK: %[[P:.*]] = "tg.shape_plan"(%arg0) ({
  // CHECK-NEXT: ^{{.*}}(%[[A:[a-z0-9]+]]: tensor<?x?x8xf32>):
  // CHECK: "tg.constant"() {value = dense<[2, 4]> : tensor<2xi64>}
  // CHECK: "tg.shape"(%[[A]])
  // CHECK: "tg.concat"
  // CHECK: "tg.yield"
  // CHECK-NEXT: }) : (tensor<?x?x8xf32>) -> tensor<4xi64>
  // CHECK-NEXT: %[[R:.*]] = "tg.reshape"(%arg0, %[[P]])
  %r = "tg.reshape"(%x, %v) {copy_zero = true} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x?x?xf32>
  %y = "tg.relu"(%x) : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %sy = "tg.shape"(%y) {out_type = "i64"} : (tensor<?x?x8xf32>) -> tensor<3xi64>
  %ny = "tg.reduce_prod"(%sy) {axes = [0], keepdims = true} : (tensor<3xi64>) -> tensor<1xi64>
  %m = "tg.constant"() {value = dense<[-1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %w = "tg.concat"(%m, %ny) {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  // CHECK: %[[Y:.*]] = "tg.relu"(%arg0)
  // CHECK-NEXT: %[[Q:.*]] = "tg.shape_plan"(%[[Y]]) ({
  // CHECK: "tg.reduce_prod"
  // CHECK: }) : (tensor<?x?x8xf32>) -> tensor<2xi64>
  // CHECK-NEXT: "tg.reshape"(%[[Y]], %[[Q]])
  // CHECK-NOT: "tg.gather"
  %z = "tg.reshape"(%y, %w) {copy_zero = true} : (tensor<?x?x8xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  func.return %r, %z : tensor<?x?x?x?xf32>, tensor<?x?xf32>
}
