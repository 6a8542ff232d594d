// RUN: bef_executor %s.bef | FileCheck %s

// The MNIST-training kernels (examples/mnist/README.md) on tiny tensors.

// CHECK-LABEL: --- Running 'training_step_kernels'
func.func @training_step_kernels() {
  %ch0 = tfrt.new.chain
  %x = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 2 : i64]
  %ch1 = tfrt_dht.set_tensor_with_constant_values.f32 %x, %ch0 [0.0 : f32, 0.0 : f32, 1.0 : f32, -1.0 : f32]
  %ch2 = "tfrt_test.softmax_inplace.f32"(%x, %ch1) : (!t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [2, 2], values = [5.000000e-01, 5.000000e-01, 8.807971e-01, 1.192029e-01]
  %ch3 = tfrt_dht.print_tensor %x, %ch2
  %t = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 2 : i64]
  %ch4 = "tfrt_test.tensor_transpose.f32"(%x, %t, %ch3) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [2, 2], values = [5.000000e-01, 8.807971e-01, 5.000000e-01, 1.192029e-01]
  %ch5 = tfrt_dht.print_tensor %t, %ch4
  %m = tfrt_dht.create_uninitialized_tensor.f32.1 [2 : i64]
  %ch6 = "tfrt_test.mean_axis_zero.f32"(%x, %m, %ch5) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [2], values = [6.903986e-01, 3.096015e-01]
  %ch7 = tfrt_dht.print_tensor %m, %ch6
  %lr = tfrt_dht.create_uninitialized_tensor.f32.1 [1 : i64]
  %ch8 = tfrt_dht.fill_tensor_with_constant.f32 %lr, %ch7 0.5 : f32
  %w = tfrt_dht.create_uninitialized_tensor.f32.1 [2 : i64]
  %ch9 = tfrt_dht.fill_tensor_with_constant.f32 %w, %ch8 1.0 : f32
  %ch10 = "tfrt_test.gradient_descent.f32"(%m, %lr, %w, %ch9) : (!t.tensor, !t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [2], values = [6.548007e-01, 8.451993e-01]
  %ch11 = tfrt_dht.print_tensor %w, %ch10
  %ch12 = "tfrt_test.subtract_inplace.f32"(%m, %w, %ch11) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [2], values = [-3.559786e-02, 5.355978e-01]
  %ch13 = tfrt_dht.print_tensor %w, %ch12
  %act = tfrt_dht.create_uninitialized_tensor.f32.1 [2 : i64]
  %ch14 = tfrt_dht.set_tensor_with_constant_values.f32 %act, %ch13 [-1.0 : f32, 2.0 : f32]
  %ch15 = "tfrt_test.relu_grad_inplace.f32"(%act, %w, %ch14) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [2], values = [0.000000e+00, 5.355978e-01]
  %ch16 = tfrt_dht.print_tensor %w, %ch15
  tfrt.return
}
