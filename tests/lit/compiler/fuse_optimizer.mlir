// no_bef_translation
// RUN: tfrt_opt -tg-fuse-optimizer %s | FileCheck %s

// Keras' Adam on two variables (the second one's squared gradient given: a densified sparse
// gradient): one tg.apply_adam at the second assign, the first update's step size, every
// gradient; the per-variable ops and the second step-size expression (with its reads) go.
// CHECK-LABEL: func.func @adam
func.func @adam(%g1: tensor<4x3xf32>, %g2: tensor<3xf32>, %s2: tensor<3xf32>) -> tensor<f32> {
  %one = "tg.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %c1 = "tg.constant"() {value = dense<0.1> : tensor<f32>} : () -> tensor<f32>
  %c2 = "tg.constant"() {value = dense<0.001> : tensor<f32>} : () -> tensor<f32>
  %eps = "tg.constant"() {value = dense<1.0e-07> : tensor<f32>} : () -> tensor<f32>
  // CHECK: %[[LR:.*]] = "tg.read_variable"() {name = "adam/learning_rate"}
  // CHECK-NEXT: %[[A:.*]] = "tg.mul"(%[[LR]], %{{.*}})
  %lr = "tg.read_variable"() {name = "adam/learning_rate"} : () -> tensor<f32>
  %a = "tg.mul"(%lr, %c1) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  // CHECK-NOT: tg.assign_add_variable
  // CHECK-NOT: tg.sqrt
  %m0 = "tg.read_variable"() {name = "adam/w_momentum"} : () -> tensor<4x3xf32>
  %d0 = "tg.sub"(%g1, %m0) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %e0 = "tg.mul"(%d0, %c1) : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  "tg.assign_add_variable"(%e0) {name = "adam/w_momentum"} : (tensor<4x3xf32>) -> ()
  %q0 = "tg.square"(%g1) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %v0 = "tg.read_variable"() {name = "adam/w_velocity"} : () -> tensor<4x3xf32>
  %f0 = "tg.sub"(%q0, %v0) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %h0 = "tg.mul"(%f0, %c2) : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  "tg.assign_add_variable"(%h0) {name = "adam/w_velocity"} : (tensor<4x3xf32>) -> ()
  %m1 = "tg.read_variable"() {name = "adam/w_momentum"} : () -> tensor<4x3xf32>
  %n1 = "tg.mul"(%m1, %a) : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %v1 = "tg.read_variable"() {name = "adam/w_velocity"} : () -> tensor<4x3xf32>
  %r1 = "tg.sqrt"(%v1) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %t1 = "tg.add"(%r1, %eps) : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %u1 = "tg.div"(%n1, %t1) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  "tg.assign_sub_variable"(%u1) {name = "w"} : (tensor<4x3xf32>) -> ()
  // CHECK-NOT: tg.read_variable
  %lrb = "tg.read_variable"() {name = "adam/learning_rate"} : () -> tensor<f32>
  %ab = "tg.mul"(%lrb, %c1) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %m2 = "tg.read_variable"() {name = "adam/b_momentum"} : () -> tensor<3xf32>
  %d2 = "tg.sub"(%g2, %m2) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %e2 = "tg.mul"(%c1, %d2) : (tensor<f32>, tensor<3xf32>) -> tensor<3xf32>
  "tg.assign_add_variable"(%e2) {name = "adam/b_momentum"} : (tensor<3xf32>) -> ()
  %v2 = "tg.read_variable"() {name = "adam/b_velocity"} : () -> tensor<3xf32>
  %f2 = "tg.sub"(%s2, %v2) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %h2 = "tg.mul"(%f2, %c2) : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  "tg.assign_add_variable"(%h2) {name = "adam/b_velocity"} : (tensor<3xf32>) -> ()
  %m3 = "tg.read_variable"() {name = "adam/b_momentum"} : () -> tensor<3xf32>
  %n3 = "tg.mul"(%ab, %m3) : (tensor<f32>, tensor<3xf32>) -> tensor<3xf32>
  %v3 = "tg.read_variable"() {name = "adam/b_velocity"} : () -> tensor<3xf32>
  %r3 = "tg.sqrt"(%v3) : (tensor<3xf32>) -> tensor<3xf32>
  %t3 = "tg.add"(%eps, %r3) : (tensor<f32>, tensor<3xf32>) -> tensor<3xf32>
  %u3 = "tg.div"(%n3, %t3) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  // CHECK: "tg.apply_adam"(%[[A]], %arg0, %arg1, %arg2) {epsilon = 1.0000000116860974e-07, moments = "adam/w_momentum,adam/b_momentum", one_minus_beta_1 = 0.10000000149011612, one_minus_beta_2 = 0.0010000000474974513, squares = [-1, 3], variables = "w,b", velocities = "adam/w_velocity,adam/b_velocity"} : (tensor<f32>, tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>) -> ()
  "tg.assign_sub_variable"(%u3) {name = "b"} : (tensor<3xf32>) -> ()
  // CHECK-NOT: tg.assign_sub_variable
  // CHECK: func.return %[[LR]]
  func.return %lr : tensor<f32>
}

// Keras' SGD with momentum: one tg.apply_momentum.
// CHECK-LABEL: func.func @momentum
func.func @momentum(%g: tensor<5xf32>) -> () {
  %mu = "tg.constant"() {value = dense<0.9> : tensor<f32>} : () -> tensor<f32>
  // CHECK: %[[LR:.*]] = "tg.read_variable"() {name = "sgd/learning_rate"}
  // CHECK-NEXT: "tg.apply_momentum"(%[[LR]], %arg0) {moments = "sgd/k_momentum", momentum = 0.89999997615814209, variables = "k"} : (tensor<f32>, tensor<5xf32>) -> ()
  // CHECK-NEXT: func.return
  %lr = "tg.read_variable"() {name = "sgd/learning_rate"} : () -> tensor<f32>
  %m0 = "tg.read_variable"() {name = "sgd/k_momentum"} : () -> tensor<5xf32>
  %a = "tg.mul"(%m0, %mu) : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
  %b = "tg.mul"(%g, %lr) : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
  %c = "tg.sub"(%a, %b) : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  "tg.assign_variable"(%c) {name = "sgd/k_momentum"} : (tensor<5xf32>) -> ()
  %m1 = "tg.read_variable"() {name = "sgd/k_momentum"} : () -> tensor<5xf32>
  "tg.assign_add_variable"(%m1) {name = "k"} : (tensor<5xf32>) -> ()
  func.return
}

// The momentum slot is read once more (returned): its update stays as it is; so does one whose
// variable is read between its update's first op and its assign.
// CHECK-LABEL: func.func @kept
func.func @kept(%g: tensor<5xf32>) -> (tensor<5xf32>, tensor<5xf32>) {
  // CHECK-NOT: tg.apply_momentum
  // CHECK: "tg.assign_add_variable"
  // CHECK: "tg.assign_add_variable"
  %mu = "tg.constant"() {value = dense<0.9> : tensor<f32>} : () -> tensor<f32>
  %lr = "tg.read_variable"() {name = "sgd/learning_rate"} : () -> tensor<f32>
  %m0 = "tg.read_variable"() {name = "sgd/j_momentum"} : () -> tensor<5xf32>
  %a = "tg.mul"(%m0, %mu) : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
  %b = "tg.mul"(%g, %lr) : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
  %c = "tg.sub"(%a, %b) : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  "tg.assign_variable"(%c) {name = "sgd/j_momentum"} : (tensor<5xf32>) -> ()
  %m1 = "tg.read_variable"() {name = "sgd/j_momentum"} : () -> tensor<5xf32>
  "tg.assign_add_variable"(%m1) {name = "j"} : (tensor<5xf32>) -> ()
  %x = "tg.read_variable"() {name = "sgd/j_momentum"} : () -> tensor<5xf32>
  %n0 = "tg.read_variable"() {name = "sgd/i_momentum"} : () -> tensor<5xf32>
  %d = "tg.mul"(%n0, %mu) : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
  %e = "tg.mul"(%g, %lr) : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
  %f = "tg.sub"(%d, %e) : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  "tg.assign_variable"(%f) {name = "sgd/i_momentum"} : (tensor<5xf32>) -> ()
  %y = "tg.read_variable"() {name = "i"} : () -> tensor<5xf32>
  %n1 = "tg.read_variable"() {name = "sgd/i_momentum"} : () -> tensor<5xf32>
  "tg.assign_add_variable"(%n1) {name = "i"} : (tensor<5xf32>) -> ()
  func.return %x, %y : tensor<5xf32>, tensor<5xf32>
}
