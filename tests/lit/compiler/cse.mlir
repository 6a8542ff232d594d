// no_bef_translation
// RUN: tfrt_opt -tg-cse %s | FileCheck %s

// Two ops that are the same computation (same op, operands, attributes and result type)
// become one; ops that differ in an attribute or an operand stay, and so do stateful ops
// and control flow.  A merged constant makes its users' operands equal, so they merge too.
// CHECK-LABEL: func.func @branch
func.func @branch(%a: tensor<f32>) -> tensor<f32> {
  func.return %a : tensor<f32>
}
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<?x?x8xf32>, %p: tensor<i1>) -> (tensor<i64>, tensor<i64>, tensor<i64>, tensor<1x?x?x8xf32>, tensor<?x1x?x8xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  // CHECK: %[[S:.*]] = "tg.shape"(%arg0) {out_type = "i64"}
  // CHECK-NOT: "tg.shape"
  %s1 = "tg.shape"(%x) {out_type = "i64"} : (tensor<?x?x8xf32>) -> tensor<3xi64>
  %s2 = "tg.shape"(%x) {out_type = "i64"} : (tensor<?x?x8xf32>) -> tensor<3xi64>
  // CHECK: %[[C1:.*]] = "tg.constant"() {value = dense<1> : tensor<i64>}
  // CHECK: %[[C0:.*]] = "tg.constant"() {value = dense<0> : tensor<i64>}
  // CHECK-NOT: "tg.constant"
  %c1 = "tg.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %c1b = "tg.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %c0 = "tg.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  // CHECK: %[[G1:.*]] = "tg.gather"(%[[S]], %[[C1]])
  // CHECK: %[[G0:.*]] = "tg.gather"(%[[S]], %[[C0]])
  // CHECK-NOT: "tg.gather"
  %g1 = "tg.gather"(%s1, %c1) {axis = 0 : i64, batch_dims = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %g1b = "tg.gather"(%s2, %c1b) {axis = 0 : i64, batch_dims = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %g0 = "tg.gather"(%s2, %c0) {axis = 0 : i64, batch_dims = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  // CHECK: %[[E0:.*]] = "tg.expand_dims"(%arg0) {axis = 0}
  // CHECK: %[[E1:.*]] = "tg.expand_dims"(%arg0) {axis = 1}
  %e0 = "tg.expand_dims"(%x) {axis = 0 : i64} : (tensor<?x?x8xf32>) -> tensor<1x?x?x8xf32>
  %e1 = "tg.expand_dims"(%x) {axis = 1 : i64} : (tensor<?x?x8xf32>) -> tensor<?x1x?x8xf32>
  // CHECK: %[[R1:.*]] = "tg.read_variable"() {name = "v"}
  // CHECK: %[[R2:.*]] = "tg.read_variable"() {name = "v"}
  %r1 = "tg.read_variable"() {name = "v"} : () -> tensor<f32>
  %r2 = "tg.read_variable"() {name = "v"} : () -> tensor<f32>
  // CHECK: %[[I1:.*]] = "tg.if"(%arg1, %[[R1]])
  // CHECK: %[[I2:.*]] = "tg.if"(%arg1, %[[R1]])
  %i1 = "tg.if"(%p, %r1) {then_branch = @branch, else_branch = @branch} : (tensor<i1>, tensor<f32>) -> tensor<f32>
  %i2 = "tg.if"(%p, %r1) {then_branch = @branch, else_branch = @branch} : (tensor<i1>, tensor<f32>) -> tensor<f32>
  // CHECK: func.return %[[G1]], %[[G1]], %[[G0]], %[[E0]], %[[E1]], %[[R1]], %[[R2]], %[[I1]], %[[I2]]
  func.return %g1, %g1b, %g0, %e0, %e1, %r1, %r2, %i1, %i2 : tensor<i64>, tensor<i64>, tensor<i64>, tensor<1x?x?x8xf32>, tensor<?x1x?x8xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}
