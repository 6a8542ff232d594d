// no_bef_translation
// RUN: tfrt_opt -tg-fuse-batch-stats %s | FileCheck %s

// tf.nn.moments over N, H, W: the mean, the squared difference and its mean -> one op; a shape
// of the squared difference reads x instead (same shape).
// CHECK-LABEL: func.func @moments
func.func @moments(%x: tensor<?x4x4x3xf32>) -> (tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<4xi32>) {
  %m = "tg.reduce_mean"(%x) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %d = "tg.squared_difference"(%x, %m) : (tensor<?x4x4x3xf32>, tensor<1x1x1x3xf32>) -> tensor<?x4x4x3xf32>
  %v = "tg.reduce_mean"(%d) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %s = "tg.shape"(%d) {out_type = "i32"} : (tensor<?x4x4x3xf32>) -> tensor<4xi32>
  // CHECK: %[[ST:.*]]:2 = "tg.moments"(%arg0) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> (tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>)
  // CHECK-NOT: tg.reduce_mean
  // CHECK-NOT: tg.squared_difference
  // CHECK: %[[S:.*]] = "tg.shape"(%arg0)
  // CHECK-NEXT: func.return %[[ST]]#0, %[[ST]]#1, %[[S]]
  func.return %m, %v, %s : tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<4xi32>
}

// The squared difference has another user: nothing changes.
// CHECK-LABEL: func.func @moments_kept
func.func @moments_kept(%x: tensor<?x4x4x3xf32>) -> (tensor<1x1x1x3xf32>, tensor<?x4x4x3xf32>) {
  %m = "tg.reduce_mean"(%x) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %d = "tg.squared_difference"(%x, %m) : (tensor<?x4x4x3xf32>, tensor<1x1x1x3xf32>) -> tensor<?x4x4x3xf32>
  %v = "tg.reduce_mean"(%d) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  // CHECK-NOT: tg.moments
  // CHECK: tg.squared_difference
  func.return %v, %d : tensor<1x1x1x3xf32>, tensor<?x4x4x3xf32>
}

// A batch norm's gradient sums: sum(dy) and sum(x * dy) -> one op (relu6_grad: its operands
// have one shape, so x * g has g's).
// CHECK-LABEL: func.func @gradient_sums
func.func @gradient_sums(%x: tensor<?x4x4x3xf32>, %dy: tensor<?x4x4x3xf32>) -> (tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>) {
  %g = "tg.relu6_grad"(%dy, %x) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %s = "tg.reduce_sum"(%g) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %p = "tg.mul"(%x, %g) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %t = "tg.reduce_sum"(%p) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  // CHECK: %[[G:.*]] = "tg.relu6_grad"(%arg1, %arg0)
  // CHECK-NEXT: %[[ST:.*]]:2 = "tg.sum_and_dot"(%[[G]], %arg0) {axes = [0, 1, 2], keepdims = true}
  // CHECK-NEXT: func.return %[[ST]]#0, %[[ST]]#1
  func.return %s, %t : tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>
}

// Two different unknown batches: x * dy need not have dy's shape, nothing changes.
// CHECK-LABEL: func.func @gradient_sums_unproved
func.func @gradient_sums_unproved(%x: tensor<?x4x4x3xf32>, %dy: tensor<?x4x4x3xf32>) -> (tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>) {
  %s = "tg.reduce_sum"(%dy) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %p = "tg.mul"(%x, %dy) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %t = "tg.reduce_sum"(%p) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  // CHECK-NOT: tg.sum_and_dot
  func.return %s, %t : tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>
}

// A per-channel vector broadcast to x's shape, divided by a count, added to a tensor of x's
// shape: the division moves onto the vector and the add reads the vector itself.
// CHECK-LABEL: func.func @broadcast
func.func @broadcast(%x: tensor<?x4x4x3xf32>, %v: tensor<1x1x1x3xf32>) -> tensor<?x4x4x3xf32> {
  %s = "tg.shape"(%x) {out_type = "i32"} : (tensor<?x4x4x3xf32>) -> tensor<4xi32>
  %s64 = "tg.cast"(%s) {to = "i64"} : (tensor<4xi32>) -> tensor<4xi64>
  %b = "tg.broadcast_to"(%v, %s64) : (tensor<1x1x1x3xf32>, tensor<4xi64>) -> tensor<?x?x?x3xf32>
  %n = "tg.constant"() {value = dense<16.0> : tensor<f32>} : () -> tensor<f32>
  %q = "tg.div"(%b, %n) : (tensor<?x?x?x3xf32>, tensor<f32>) -> tensor<?x?x?x3xf32>
  %r = "tg.relu"(%x) : (tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %y = "tg.add"(%r, %q) : (tensor<?x4x4x3xf32>, tensor<?x?x?x3xf32>) -> tensor<?x4x4x3xf32>
  // CHECK: %[[Q:.*]] = "tg.div"(%arg1, %{{.*}}) : (tensor<1x1x1x3xf32>, tensor<f32>) -> tensor<1x1x1x3xf32>
  // CHECK: %[[R:.*]] = "tg.relu"(%arg0)
  // CHECK-NEXT: %[[Y:.*]] = "tg.add"(%[[R]], %[[Q]]) : (tensor<?x4x4x3xf32>, tensor<1x1x1x3xf32>) -> tensor<?x4x4x3xf32>
  // CHECK-NOT: tg.broadcast_to
  // CHECK: func.return %[[Y]]
  func.return %y : tensor<?x4x4x3xf32>
}

// The broadcast's target is another value's shape, of an unrelated batch: kept.
// CHECK-LABEL: func.func @broadcast_kept
func.func @broadcast_kept(%x: tensor<?x4x4x3xf32>, %z: tensor<?x4x4x3xf32>, %v: tensor<1x1x1x3xf32>) -> tensor<?x4x4x3xf32> {
  %s = "tg.shape"(%z) {out_type = "i64"} : (tensor<?x4x4x3xf32>) -> tensor<4xi64>
  %b = "tg.broadcast_to"(%v, %s) : (tensor<1x1x1x3xf32>, tensor<4xi64>) -> tensor<?x4x4x3xf32>
  %y = "tg.add"(%x, %b) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  // CHECK: %[[B:.*]] = "tg.broadcast_to"(%arg2
  // CHECK-NEXT: "tg.add"(%arg0, %[[B]])
  func.return %y : tensor<?x4x4x3xf32>
}

// The gradient behind a ReLU: relu_grad joins the sums (one pass writes g and sums it).
// CHECK-LABEL: func.func @relu_gradient_sums
func.func @relu_gradient_sums(%x: tensor<?x4x4x3xf32>, %dy: tensor<?x4x4x3xf32>) -> (tensor<?x4x4x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>) {
  %y = "tg.relu"(%x) : (tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %g = "tg.relu_grad"(%dy, %y) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %e = "tg.exp"(%g) : (tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %p = "tg.mul"(%x, %g) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %t = "tg.reduce_sum"(%p) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %s = "tg.reduce_sum"(%g) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  // CHECK: %[[Y:.*]] = "tg.relu"(%arg0)
  // CHECK-NEXT: %[[R:.*]]:3 = "tg.relu_grad_sums"(%arg1, %[[Y]], %arg0) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> (tensor<?x4x4x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>)
  // CHECK-NEXT: %[[E:.*]] = "tg.exp"(%[[R]]#0)
  // CHECK-NOT: tg.relu_grad"
  // CHECK: func.return %[[E]], %[[R]]#1, %[[R]]#2
  func.return %e, %s, %t : tensor<?x4x4x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>
}

// A global average pool's gradient behind a ReLU (TF's graph: the pooled gradient divided by
// the pixel count, broadcast to the activation's shape; the ReLU gradient reshaped to its own
// shape), then a batch norm's sums: one relu_grad_sums reading the pooled rows, no broadcast.
// CHECK-LABEL: func.func @pooled_relu_sums
func.func @pooled_relu_sums(%y: tensor<?x4x4x3xf32>, %x: tensor<?x4x4x3xf32>, %p: tensor<?x3xf32>) -> (tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<?x4x4x3xf32>) {
  %r = "tg.reshape"(%p) {shape = [-1, 1, 1, 3]} : (tensor<?x3xf32>) -> tensor<?x1x1x3xf32>
  %s = "tg.shape"(%y) {out_type = "i32"} : (tensor<?x4x4x3xf32>) -> tensor<4xi32>
  %s64 = "tg.cast"(%s) {to = "i64"} : (tensor<4xi32>) -> tensor<4xi64>
  %n = "tg.constant"() {value = dense<16.0> : tensor<f32>} : () -> tensor<f32>
  %b = "tg.broadcast_to"(%r, %s64) : (tensor<?x1x1x3xf32>, tensor<4xi64>) -> tensor<?x?x?x3xf32>
  %q = "tg.div"(%b, %n) : (tensor<?x?x?x3xf32>, tensor<f32>) -> tensor<?x?x?x3xf32>
  %g = "tg.relu_grad"(%q, %y) : (tensor<?x?x?x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %g2 = "tg.reshape"(%g) {shape = [-1, 4, 4, 3]} : (tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %sum = "tg.reduce_sum"(%g2) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %m = "tg.mul"(%g2, %y) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %dot = "tg.reduce_sum"(%m) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  // CHECK: %[[R:.*]] = "tg.reshape"(%arg2)
  // CHECK: %[[Q:.*]] = "tg.div"(%[[R]], %{{.*}}) : (tensor<?x1x1x3xf32>, tensor<f32>) -> tensor<?x1x1x3xf32>
  // CHECK-NOT: tg.broadcast_to
  // CHECK: %[[ST:.*]]:3 = "tg.relu_grad_sums"(%[[Q]], %arg0, %arg0) {axes = [0, 1, 2], keepdims = true} : (tensor<?x1x1x3xf32>, tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> (tensor<?x4x4x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>)
  // CHECK-NOT: tg.relu_grad"
  // CHECK-NOT: tg.broadcast_to
  // CHECK: %[[G2:.*]] = "tg.reshape"(%[[ST]]#0)
  // CHECK: func.return %[[ST]]#1, %[[ST]]#2, %[[G2]]
  func.return %sum, %dot, %g2 : tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<?x4x4x3xf32>
}

// A residual block's input gets two gradients (the shortcut's and the main branch's): their
// add, used only by the ReLU gradient, joins the sums as relu_grad_sums' fourth operand.  An
// add with another user, or of a broadcast operand, stays.
// CHECK-LABEL: func.func @residual_gradient_sums
func.func @residual_gradient_sums(%x: tensor<?x4x4x3xf32>, %d1: tensor<?x4x4x3xf32>, %d2: tensor<?x4x4x3xf32>, %c: tensor<3xf32>) -> (tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<?x4x4x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>) {
  %y = "tg.relu"(%x) : (tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %dy = "tg.add"(%d1, %d2) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %g = "tg.relu_grad"(%dy, %y) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %p = "tg.mul"(%x, %g) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %t = "tg.reduce_sum"(%p) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %s = "tg.reduce_sum"(%g) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  // CHECK: %[[Y:.*]] = "tg.relu"(%arg0)
  // CHECK-NEXT: %[[R:.*]]:3 = "tg.relu_grad_sums"(%arg1, %[[Y]], %arg0, %arg2) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> (tensor<?x4x4x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>)
  %dz = "tg.add"(%d1, %d2) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %gz = "tg.relu_grad"(%dz, %y) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %pz = "tg.mul"(%x, %gz) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %tz = "tg.reduce_sum"(%pz) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %sz = "tg.reduce_sum"(%gz) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  // CHECK: %[[DZ:.*]] = "tg.add"(%arg1, %arg2)
  // CHECK-NEXT: "tg.relu_grad_sums"(%[[DZ]], %[[Y]], %arg0) {
  %dc = "tg.add"(%d1, %c) : (tensor<?x4x4x3xf32>, tensor<3xf32>) -> tensor<?x4x4x3xf32>
  %gc = "tg.relu_grad"(%dc, %y) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %pc = "tg.mul"(%x, %gc) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %tc = "tg.reduce_sum"(%pc) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %sc = "tg.reduce_sum"(%gc) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  // CHECK: %[[DC:.*]] = "tg.add"(%arg1, %arg3)
  // CHECK-NEXT: "tg.relu_grad_sums"(%[[DC]], %[[Y]], %arg0) {
  func.return %s, %t, %dz, %sz, %tz, %sc, %tc : tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<?x4x4x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>
}

// Two batch norms read one gradient (a residual stage's main branch and its projection
// shortcut): the second product's sum joins the relu_grad_sums pass; a b2 that broadcasts (a
// per-channel vector) or whose batch size is not provably g's (another argument) does not.
// CHECK-LABEL: func.func @second_dot
func.func @second_dot(%x: tensor<?x4x4x3xf32>, %o: tensor<?x4x4x3xf32>, %d1: tensor<?x4x4x3xf32>, %d2: tensor<?x4x4x3xf32>, %c: tensor<3xf32>) -> (tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<?x4x4x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>) {
  %y = "tg.relu"(%x) : (tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %x2 = "tg.neg"(%x) : (tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %dy = "tg.add"(%d1, %d2) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %g = "tg.relu_grad"(%dy, %y) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %p = "tg.mul"(%x, %g) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %t = "tg.reduce_sum"(%p) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %s = "tg.reduce_sum"(%g) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %p2 = "tg.mul"(%x2, %g) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %t2 = "tg.reduce_sum"(%p2) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %p3 = "tg.mul"(%g, %c) : (tensor<?x4x4x3xf32>, tensor<3xf32>) -> tensor<?x4x4x3xf32>
  %t3 = "tg.reduce_sum"(%p3) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %p4 = "tg.mul"(%g, %o) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %t4 = "tg.reduce_sum"(%p4) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  // CHECK: %[[Y:.*]] = "tg.relu"(%arg0)
  // CHECK-NEXT: %[[X2:.*]] = "tg.neg"(%arg0)
  // CHECK-NEXT: %[[R:.*]]:4 = "tg.relu_grad_sums2"(%arg2, %[[Y]], %arg0, %[[X2]], %arg3) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> (tensor<?x4x4x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>)
  // CHECK-NEXT: %[[P3:.*]] = "tg.mul"(%[[R]]#0, %arg4)
  // CHECK-NEXT: %[[T3:.*]] = "tg.reduce_sum"(%[[P3]])
  // CHECK-NEXT: %[[P4:.*]] = "tg.mul"(%[[R]]#0, %arg1)
  // CHECK-NEXT: %[[T4:.*]] = "tg.reduce_sum"(%[[P4]])
  // CHECK-NEXT: func.return %[[R]]#1, %[[R]]#2, %[[R]]#3, %[[R]]#0, %[[T3]], %[[T4]]
  func.return %s, %t, %t2, %g, %t3, %t4 : tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<?x4x4x3xf32>, tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>
}
