// RUN: bef_executor %s.bef 2>&1 | FileCheck %s

// ResNet kernels (docs/kernels.md, examples/mnist/README.md): flatten, max pooling against Inputs/max_pool.btf, errors.

// CHECK-LABEL: --- Running 'test_flatten_f32'
func.func @test_flatten_f32() {
  %ch0 = tfrt.new.chain
  %t1 = tfrt_dht.create_uninitialized_tensor.f32.4 [1 : i64, 2 : i64, 2 : i64, 1 : i64]
  %ch1 = tfrt_dht.set_tensor_with_constant_values.f32 %t1, %ch0 [1.0 : f32, 2.0 : f32, 3.0 : f32, 4.0 : f32]
  %t2 = tfrt_dht.create_uninitialized_tensor.f32.2 [1 : i64, 4 : i64]
  %ch2 = "tfrt_test.flatten.f32"(%t1, %t2, %ch1) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [1, 4], values = [1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]
  %ch3 = tfrt_dht.print_tensor %t2, %ch2
  tfrt.return
}

// CHECK-LABEL: --- Running 'test_max_pool'
func.func @test_max_pool() {
  %ch0 = tfrt.new.chain
  %path = "tfrt_test.get_string"() { value = "tests/lit/cpu/Inputs/max_pool.btf" } : () -> !tfrt.string
  %i0 = tfrt.constant.i32 0
  %i1 = tfrt.constant.i32 1
  %x = "btf.read_dense_tensor.f32.4"(%path, %i0) : (!tfrt.string, i32) -> (!t.tensor)
  %expected = "btf.read_dense_tensor.f32.4"(%path, %i1) : (!tfrt.string, i32) -> (!t.tensor)
  %y = tfrt_dht.create_uninitialized_tensor.f32.4 [1 : i64, 2 : i64, 2 : i64, 2 : i64]
  %ch1 = "tfrt_test.max_pooling_2d.f32"(%x, %y, %ch0) {padding = "valid", pool_size = [3 : i32, 3 : i32], strides = [3 : i32, 3 : i32]} : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  %close, %ch2 = "tfrt_dht.tensor_allclose.f32"(%y, %expected, %ch1) : (!t.tensor, !t.tensor, !tfrt.chain) -> (i1, !tfrt.chain)
  // CHECK-NEXT: int1 = 1
  %ch3 = tfrt.print.i1 %close, %ch2
  tfrt.return
}

// CHECK-LABEL: --- Running 'test_max_pool_errors'
func.func @test_max_pool_errors() {
  %ch0 = tfrt.new.chain
  %input = tfrt_dht.create_uninitialized_tensor.f32.4 [2 : i64, 3 : i64, 3 : i64, 6 : i64]
  %out = tfrt_dht.create_uninitialized_tensor.f32.4 [2 : i64, 1 : i64, 1 : i64, 6 : i64]
  %bad = tfrt_dht.create_uninitialized_tensor.f32.4 [2 : i64, 2 : i64, 1 : i64, 6 : i64]
  // expected-error @+1 {{runtime error: MaxPool2D padding 'invalid' is not recognized}}
  %ch1 = "tfrt_test.max_pooling_2d.f32"(%input, %out, %ch0) {padding = "invalid", pool_size = [3 : i32, 3 : i32], strides = [3 : i32, 3 : i32]} : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // expected-error @+1 {{runtime error: MaxPool2D output shape [2, 2, 1, 6] does not match the expected output shape [2, 1, 1, 6]}}
  %ch2 = "tfrt_test.max_pooling_2d.f32"(%input, %bad, %ch0) {padding = "valid", pool_size = [3 : i32, 3 : i32], strides = [3 : i32, 3 : i32]} : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  %flat = tfrt_dht.create_uninitialized_tensor.f32.2 [3 : i64, 36 : i64]
  // expected-error @+1 {{runtime error: Flatten output shape [3, 36] does not match the input shape [2, 3, 3, 6]}}
  %ch3 = "tfrt_test.flatten.f32"(%input, %flat, %ch0) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  tfrt.return
}
// CHECK-NOT: error
