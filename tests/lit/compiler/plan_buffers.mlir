// no_bef_translation
// RUN: tfrt_opt -tg-plan-buffers %s | FileCheck %s

// tg.buffer = [slot, site, first, last]; first..last is the value's lifetime in op positions
// (%c's runs to the neg at 6; through the reshape view, the relu at 4 reads it too).  %a and
// %b are intermediates: slots 0 and 1 (%a is still alive when %b is made; a matmul never
// writes into its own operand).  The add writes in place into %a's slot (its last use there).
// The relu reads a reshape (a view) of %c, whose slot stays taken while the view lives; slot 1
// (free since the add) has another type, so slot 2.  Returned values (%t, %u) get no slot.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<32xf32>, tensor<4x8xf32>) {
  // CHECK: %[[A:.*]] = "tg.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = false, tg.buffer = [0, 0, 0, 2]}
  %a = "tg.matmul"(%x, %w) {transpose_a = false, transpose_b = false} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[B:.*]] = "tg.matmul"(%[[A]], %arg1) {transpose_a = false, transpose_b = false, tg.buffer = [1, 1, 1, 2]}
  %b = "tg.matmul"(%a, %w) {transpose_a = false, transpose_b = false} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[C:.*]] = "tg.add"(%[[A]], %[[B]]) {tg.buffer = [0, 2, 2, 6]}
  %c = "tg.add"(%a, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[R:.*]] = "tg.reshape"(%[[C]]) {shape = [32]}
  %r = "tg.reshape"(%c) {shape = [32]} : (tensor<4x8xf32>) -> tensor<32xf32>
  // CHECK: %[[S:.*]] = "tg.relu"(%[[R]]) {tg.buffer = [2, 3, 4, 5]}
  %s = "tg.relu"(%r) : (tensor<32xf32>) -> tensor<32xf32>
  // CHECK: %[[T:.*]] = "tg.exp"(%[[S]]) : (tensor<32xf32>) -> tensor<32xf32>
  %t = "tg.exp"(%s) : (tensor<32xf32>) -> tensor<32xf32>
  // CHECK: %[[U:.*]] = "tg.neg"(%[[C]]) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %u = "tg.neg"(%c) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: func.return %[[T]], %[[U]]
  func.return %t, %u : tensor<32xf32>, tensor<4x8xf32>
}
