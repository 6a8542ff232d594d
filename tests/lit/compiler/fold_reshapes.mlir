// no_bef_translation
// RUN: tfrt_opt -tg-fold-reshapes %s | FileCheck %s

// A gradient's reshape back to its own shape (one -1 at the dynamic batch) is dropped, and
// the two multiplies then read each other directly.
// CHECK-LABEL: func.func @identity
func.func @identity(%x: tensor<?x16x32xf32>, %y: tensor<?x16x32xf32>) -> tensor<?x16x32xf32> {
  %m = "tg.mul"(%x, %y) : (tensor<?x16x32xf32>, tensor<?x16x32xf32>) -> tensor<?x16x32xf32>
  %r = "tg.reshape"(%m) {shape = [-1, 16, 32]} : (tensor<?x16x32xf32>) -> tensor<?x16x32xf32>
  %a = "tg.add"(%r, %y) : (tensor<?x16x32xf32>, tensor<?x16x32xf32>) -> tensor<?x16x32xf32>
  // CHECK-NOT: "tg.reshape"
  // CHECK: %[[M:.*]] = "tg.mul"(%arg0, %arg1)
  // CHECK-NEXT: %[[A:.*]] = "tg.add"(%[[M]], %arg1)
  // CHECK-NEXT: func.return %[[A]]
  func.return %a : tensor<?x16x32xf32>
}

// A static reshape to the same shape is dropped too.
// CHECK-LABEL: func.func @static_identity
func.func @static_identity(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = "tg.reshape"(%x) {shape = [4, 8]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NOT: "tg.reshape"
  // CHECK: func.return %arg0
  func.return %r : tensor<4x8xf32>
}

// A chain of reshapes reads the first operand; here the chain ends where it started.
// CHECK-LABEL: func.func @chain_back
func.func @chain_back(%x: tensor<?x16x32xf32>) -> tensor<?x16x32xf32> {
  %a = "tg.reshape"(%x) {shape = [-1, 32]} : (tensor<?x16x32xf32>) -> tensor<?x32xf32>
  %b = "tg.reshape"(%a) {shape = [-1, 16, 32]} : (tensor<?x32xf32>) -> tensor<?x16x32xf32>
  // CHECK-NOT: "tg.reshape"
  // CHECK: func.return %arg0
  func.return %b : tensor<?x16x32xf32>
}

// A chain to a new shape becomes one reshape; the inner one stays while something else
// reads it.
// CHECK-LABEL: func.func @chain_shared
func.func @chain_shared(%x: tensor<2x3x4xf32>) -> (tensor<24xf32>, tensor<6x4xf32>) {
  %a = "tg.reshape"(%x) {shape = [6, 4]} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %b = "tg.reshape"(%a) {shape = [24]} : (tensor<6x4xf32>) -> tensor<24xf32>
  // CHECK: %[[A:.*]] = "tg.reshape"(%arg0) {shape = [6{{( : i64)?}}, 4{{( : i64)?}}]}
  // CHECK-NEXT: %[[B:.*]] = "tg.reshape"(%arg0) {shape = [24{{( : i64)?}}]}
  // CHECK-NEXT: func.return %[[B]], %[[A]]
  func.return %b, %a : tensor<24xf32>, tensor<6x4xf32>
}

// Not identities: two dynamic dims (the -1 cannot be proved), a different rank, a
// run-time shape operand, a 0 entry that copies a dimension.
// CHECK-LABEL: func.func @kept
func.func @kept(%x: tensor<?x?xf32>, %y: tensor<?x16xf32>, %s: tensor<2xi64>) -> (tensor<?x?xf32>, tensor<?x4x4xf32>, tensor<?x?xf32>, tensor<?x16xf32>) {
  %a = "tg.reshape"(%x) {shape = [-1, 8]} : (tensor<?x?xf32>) -> tensor<?x8xf32>
  %a2 = "tg.reshape"(%x) {shape = [-1, 3]} : (tensor<?x?xf32>) -> tensor<?x3xf32>
  %b = "tg.reshape"(%y) {shape = [-1, 4, 4]} : (tensor<?x16xf32>) -> tensor<?x4x4xf32>
  %c = "tg.reshape"(%y, %s) : (tensor<?x16xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  %d = "tg.reshape"(%y) {shape = [0, 16], copy_zero = true} : (tensor<?x16xf32>) -> tensor<?x16xf32>
  // CHECK-COUNT-2: "tg.reshape"(%arg0)
  // CHECK: "tg.reshape"(%arg1) {shape = [-1{{( : i64)?}}, 4{{( : i64)?}}, 4{{( : i64)?}}]}
  // CHECK: "tg.reshape"(%arg1, %arg2)
  // CHECK: "tg.reshape"(%arg1) {{{.*}}shape = [0{{( : i64)?}}, 16{{( : i64)?}}]}
  func.return %x, %b, %c, %d : tensor<?x?xf32>, tensor<?x4x4xf32>, tensor<?x?xf32>, tensor<?x16xf32>
}
