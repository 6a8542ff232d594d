// RUN: bef_executor %s.bef | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's backends/cpu/mlir_tests/mnist/mnist_tensor_kernels.mlir
// (docs/kernels.md): relu, add, equal, matmul, argmax, reduce_mean and cast on small tensors.

// CHECK-LABEL: --- Running 'mnist_tensor_kernels'
func.func @mnist_tensor_kernels() {
  %ch0 = tfrt.new.chain
  %zero = tfrt.constant.i32 0
  %one = tfrt.constant.i32 1

  %a = tfrt_dht.create_uninitialized_tensor.i32.2 [2 : i64, 2 : i64]
  %ch1 = tfrt_dht.set_tensor_with_constant_values.i32 %a, %ch0 [-1 : i32, 2 : i32, 3 : i32, -4 : i32]
  %b = tfrt_dht.create_uninitialized_tensor.i32.2 [2 : i64, 2 : i64]
  %ch2 = "tfrt_test.relu.i32"(%a, %b, %ch1) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [2, 2], values = [0, 2, 3, 0]
  %ch3 = tfrt_dht.print_tensor %b, %ch2

  %c = tfrt_dht.create_uninitialized_tensor.i32.2 [2 : i64, 2 : i64]
  %ch4 = "tfrt_test.add.i32"(%a, %b, %c, %ch3) : (!t.tensor, !t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [2, 2], values = [-1, 4, 6, -4]
  %ch5 = tfrt_dht.print_tensor %c, %ch4

  %d = tfrt_dht.create_uninitialized_tensor.i32.2 [2 : i64, 2 : i64]
  %ch6 = "tfrt_test.equal.i32"(%a, %b, %d, %ch5) : (!t.tensor, !t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [2, 2], values = [0, 1, 1, 0]
  %ch7 = tfrt_dht.print_tensor %d, %ch6

  %e = tfrt_dht.create_uninitialized_tensor.i32.2 [2 : i64, 2 : i64]
  %ch8 = tfrt_dht.fill_tensor_with_constant.i32 %e, %ch7 0 : i32
  %ch9 = "tfrt_test.matmul.i32.2"(%one, %a, %b, %zero, %e, %ch8) : (i32, !t.tensor, !t.tensor, i32, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [2, 2], values = [6, -2, -12, 6]
  %ch10 = tfrt_dht.print_tensor %e, %ch9

  %f = "tfrt_test.argmax.i32.2"(%c, %ch10) : (!t.tensor, !tfrt.chain) -> !t.tensor
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [2], values = [1, 0]
  %ch11 = tfrt_dht.print_tensor %f, %ch10

  %g = tfrt_dht.create_uninitialized_tensor.f32.1 [2 : i64]
  %ch12 = "tfrt_test.cast.i32_to_f32"(%f, %g, %ch11) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [2], values = [1.000000e+00, 0.000000e+00]
  %ch13 = tfrt_dht.print_tensor %g, %ch12

  %h = "tfrt_test.reduce_mean.f32.1"(%g, %ch13) : (!t.tensor, !tfrt.chain) -> !t.tensor
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [], values = [5.000000e-01]
  %ch14 = tfrt_dht.print_tensor %h, %ch13

  %ch15 = tfrt.merge.chains %ch14, %ch13 : !tfrt.chain, !tfrt.chain
  tfrt.return
}
