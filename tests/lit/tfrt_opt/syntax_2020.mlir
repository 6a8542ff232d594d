// RUN: tfrt_opt -allow-unregistered-dialect %s | FileCheck %s
// The 2020 spelling (examples/mlp_xor/README.md) prints in today's syntax.

// CHECK-LABEL: func.func @nqueen() {
func @nqueen() {
  // CHECK-NEXT: %0 = tfrt.new.chain
  %ch = hex.new.chain
  // CHECK-NEXT: %1 = tfrt.constant.i32 14
  %n = hex.constant.i32 14
  // CHECK-NEXT: %2 = "nqueens.i32"(%1, %1) : (i32, i32) -> i32
  %s = "nqueens.i32"(%n, %n) : (i32, i32) -> i32
  // CHECK-NEXT: %3 = tfrt.print.i32 %2, %0
  hex.print.i32 %s, %ch
  // CHECK-NEXT: %4 = tfrt.merge.chains %0, %0 : !tfrt.chain, !tfrt.chain
  %m = hex.merge.chains %ch, %ch
  // CHECK-NEXT: %5 = tfrt_dht.create_uninitialized_tensor.f32.1 [2]
  // CHECK-NEXT: %6 = tfrt_dht.print_tensor %5, %4
  %t = "dht.create_uninitialized_tensor.f32.1"() {shape = [2 : i64]} : () -> !t.tensor
  %c = dht.print_tensor %t, %m
  // CHECK: tfrt.return
  hex.return
}
