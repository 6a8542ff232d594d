// RUN: bef_executor %s.bef 2>&1 | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's backends/cpu/mlir_tests/resnet/resnet_tensor_kernels.mlir
// (docs/kernels.md): flatten, and the padding / output-shape errors of max pooling.

// CHECK-LABEL: --- Running 'flatten'
func.func @flatten() {
  %ch0 = tfrt.new.chain
  %a = tfrt_dht.create_uninitialized_tensor.f32.3 [2 : i64, 2 : i64, 2 : i64]
  %ch1 = tfrt_dht.set_tensor_with_constant_values.f32 %a, %ch0 [1.0 : f32, 2.0 : f32, 3.0 : f32, 4.0 : f32, 5.0 : f32, 6.0 : f32, 7.0 : f32, 8.0 : f32]
  %b = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 4 : i64]
  %ch2 = "tfrt_test.flatten.f32"(%a, %b, %ch1) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [2, 4], values = [1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00, 7.000000e+00, 8.000000e+00]
  %ch3 = tfrt_dht.print_tensor %b, %ch2
  tfrt.return
}

// CHECK-LABEL: --- Running 'max_pool_bad_padding'
func.func @max_pool_bad_padding() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %input = tfrt_dht.create_uninitialized_tensor.f32.4 [1 : i64, 6 : i64, 6 : i64, 2 : i64]
  %output = tfrt_dht.create_uninitialized_tensor.f32.4 [1 : i64, 2 : i64, 2 : i64, 2 : i64]
  // expected-error @+1 {{runtime error: MaxPool2D padding 'invalid' is not recognized}}
  %ch1 = "tfrt_test.max_pooling_2d.f32"(%input, %output, %ch0) {padding = "invalid", pool_size = [3 : i32, 3 : i32], strides = [3 : i32, 3 : i32]} : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: 'max_pool_bad_padding' returned <<error: MaxPool2D padding 'invalid' is not recognized>>
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'max_pool_bad_output_shape'
func.func @max_pool_bad_output_shape() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %input = tfrt_dht.create_uninitialized_tensor.f32.4 [1 : i64, 6 : i64, 6 : i64, 2 : i64]
  %output = tfrt_dht.create_uninitialized_tensor.f32.4 [1 : i64, 3 : i64, 3 : i64, 2 : i64]
  // expected-error @+1 {{runtime error: MaxPool2D output shape [1, 3, 3, 2] does not match the expected output shape [1, 2, 2, 2]}}
  %ch1 = "tfrt_test.max_pooling_2d.f32"(%input, %output, %ch0) {padding = "valid", pool_size = [3 : i32, 3 : i32], strides = [3 : i32, 3 : i32]} : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: 'max_pool_bad_output_shape' returned <<error: MaxPool2D output shape [1, 3, 3, 2] does not match the expected output shape [1, 2, 2, 2]>>
  tfrt.return %ch1 : !tfrt.chain
}
