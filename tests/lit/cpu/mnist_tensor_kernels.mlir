// RUN: bef_executor %s.bef | FileCheck %s

// The MNIST kernels on small tensors (docs/kernels.md, examples/mnist/README.md).

// CHECK-LABEL: --- Running 'test_tensor_kernels'
func.func @test_tensor_kernels() {
  %ch0 = tfrt.new.chain
  %zero = tfrt.constant.i32 0
  %one = tfrt.constant.i32 1
  %a = tfrt_dht.create_uninitialized_tensor.i32.2 [2 : i64, 3 : i64]
  %ch1 = tfrt_dht.set_tensor_with_constant_values.i32 %a, %ch0 [1 : i32, -1 : i32, 1 : i32, -1 : i32, 1 : i32, -1 : i32]
  %b = tfrt_dht.create_uninitialized_tensor.i32.2 [3 : i64, 2 : i64]
  %ch2 = tfrt_dht.set_tensor_with_constant_values.i32 %b, %ch1 [1 : i32, -1 : i32, 1 : i32, -1 : i32, 1 : i32, -1 : i32]
  %c = tfrt_dht.create_uninitialized_tensor.i32.2 [2 : i64, 2 : i64]
  %ch3 = "tfrt_test.matmul.i32.2"(%one, %a, %b, %zero, %c, %ch2) : (i32, !t.tensor, !t.tensor, i32, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: shape = [2, 2], values = [1, -1, -1, 1]
  %ch4 = tfrt_dht.print_tensor %c, %ch3
  %d = tfrt_dht.create_uninitialized_tensor.i32.2 [2 : i64, 2 : i64]
  %ch5 = "tfrt_test.relu.i32"(%c, %d, %ch4) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: shape = [2, 2], values = [1, 0, 0, 1]
  %ch6 = tfrt_dht.print_tensor %d, %ch5
  %e = tfrt_dht.create_uninitialized_tensor.i32.2 [2 : i64, 2 : i64]
  %ch7 = "tfrt_test.add.i32"(%c, %d, %e, %ch6) : (!t.tensor, !t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: shape = [2, 2], values = [2, -1, -1, 2]
  %ch8 = tfrt_dht.print_tensor %e, %ch7
  %ch9 = "tfrt_test.equal.i32"(%c, %d, %e, %ch8) : (!t.tensor, !t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: shape = [2, 2], values = [1, 0, 0, 1]
  %ch10 = tfrt_dht.print_tensor %e, %ch9
  %am = "tfrt_test.argmax.i32.2"(%c, %ch10) : (!t.tensor, !tfrt.chain) -> !t.tensor
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [2], values = [0, 1]
  %ch11 = tfrt_dht.print_tensor %am, %ch10
  %f = tfrt_dht.create_uninitialized_tensor.f32.1 [2 : i64]
  %ch12 = tfrt_dht.set_tensor_with_constant_values.f32 %f, %ch11 [1.0 : f32, 3.0 : f32]
  %m = "tfrt_test.reduce_mean.f32.1"(%f, %ch12) : (!t.tensor, !tfrt.chain) -> !t.tensor
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [], values = [2.000000e+00]
  %ch13 = tfrt_dht.print_tensor %m, %ch12
  %g = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 2 : i64]
  %ch14 = "tfrt_test.cast.i32_to_f32"(%e, %g, %ch13) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [2, 2], values = [1.000000e+00, 0.000000e+00, 0.000000e+00, 1.000000e+00]
  %ch15 = tfrt_dht.print_tensor %g, %ch14
  tfrt.return
}

// CHECK-LABEL: --- Running 'test_broadcast'
func.func @test_broadcast() {
  %ch0 = tfrt.new.chain
  // The rank suffix of the creation kernel is not checked: this tensor has shape [2].
  %a = "tfrt_dht.create_uninitialized_tensor.f32.2"() {shape = [2 : i64]} : () -> !t.tensor
  %ch1 = tfrt_dht.set_tensor_with_constant_values.f32 %a, %ch0 [1.0 : f32, 2.0 : f32]
  %s = ts.build_shape [3 : i64, 1 : i64, 2 : i64]
  %b = "tfrt_test.broadcast.f32.3"(%a, %s, %ch1) : (!t.tensor, !ts.shape, !tfrt.chain) -> !t.tensor
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [3, 1, 2], values = [1.000000e+00, 2.000000e+00, 1.000000e+00, 2.000000e+00, 1.000000e+00, 2.000000e+00]
  %ch2 = tfrt_dht.print_tensor %b, %ch1
  // A rank-2 [1, 1] bias, as the XOR playground passes (element count = last target dim).
  %o = "tfrt_dht.create_uninitialized_tensor.f32.2"() {shape = [1 : i64, 1 : i64]} : () -> !t.tensor
  %ch3 = tfrt_dht.set_tensor_with_constant_values.f32 %o, %ch2 [-3.5 : f32]
  %s2 = ts.build_shape [4 : i64, 1 : i64]
  %ob = "tfrt_test.broadcast.f32.2"(%o, %s2, %ch3) : (!t.tensor, !ts.shape, !tfrt.chain) -> !t.tensor
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [4, 1], values = [-3.500000e+00, -3.500000e+00, -3.500000e+00, -3.500000e+00]
  %ch4 = tfrt_dht.print_tensor %ob, %ch3
  %s3 = ts.build_shape [4 : i64, 3 : i64]
  // expected-error @+1 {{runtime error: broadcast input tensor dimension and target shape mismatch: [2] vs. [4, 3]}}
  %bad = "tfrt_test.broadcast.f32.2"(%a, %s3, %ch4) : (!t.tensor, !ts.shape, !tfrt.chain) -> !t.tensor
  tfrt.return
}
