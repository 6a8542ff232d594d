// RUN: bef_executor %s.bef | FileCheck %s --dump-input=always

// Reconstruction of TFRT's backends/cpu/mlir_tests/resnet/max_pool.mlir: NHWC max
// pooling with "valid" and "same" padding against expected outputs stored in a BTF file
// (written by tests/lit/tfrt/mnist/Inputs/make_inputs.py).

// CHECK-LABEL: --- Running 'max_pool_valid'
func.func @max_pool_valid() {
  %ch0 = tfrt.new.chain
  %path = "tfrt_test.get_string"() { value = "tests/lit/tfrt/resnet/Inputs/max_pool.btf" } : () -> !tfrt.string
  %zero = tfrt.constant.i32 0
  %one = tfrt.constant.i32 1

  %input = "btf.read_dense_tensor.f32.4"(%path, %zero) : (!tfrt.string, i32) -> (!t.tensor)
  %expected = "btf.read_dense_tensor.f32.4"(%path, %one) : (!tfrt.string, i32) -> (!t.tensor)
  %output = tfrt_dht.create_uninitialized_tensor.f32.4 [1 : i64, 2 : i64, 2 : i64, 2 : i64]
  %ch1 = "tfrt_test.max_pooling_2d.f32"(%input, %output, %ch0) {padding = "valid", pool_size = [3 : i32, 3 : i32], strides = [3 : i32, 3 : i32]} : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain

  %close, %ch2 = "tfrt_dht.tensor_allclose.f32"(%expected, %output, %ch1) : (!t.tensor, !t.tensor, !tfrt.chain) -> (i1, !tfrt.chain)
  // CHECK-NEXT: int1 = 1
  %ch3 = tfrt.print.i1 %close, %ch2
  tfrt.return
}

// CHECK-LABEL: --- Running 'max_pool_same'
func.func @max_pool_same() {
  %ch0 = tfrt.new.chain
  %path = "tfrt_test.get_string"() { value = "tests/lit/tfrt/resnet/Inputs/max_pool.btf" } : () -> !tfrt.string
  %zero = tfrt.constant.i32 0
  %two = tfrt.constant.i32 2

  %input = "btf.read_dense_tensor.f32.4"(%path, %zero) : (!tfrt.string, i32) -> (!t.tensor)
  %expected = "btf.read_dense_tensor.f32.4"(%path, %two) : (!tfrt.string, i32) -> (!t.tensor)
  %output = tfrt_dht.create_uninitialized_tensor.f32.4 [1 : i64, 3 : i64, 3 : i64, 2 : i64]
  %ch1 = "tfrt_test.max_pooling_2d.f32"(%input, %output, %ch0) {padding = "same", pool_size = [3 : i32, 3 : i32], strides = [2 : i32, 2 : i32]} : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain

  %close, %ch2 = "tfrt_dht.tensor_allclose.f32"(%expected, %output, %ch1) : (!t.tensor, !t.tensor, !tfrt.chain) -> (i1, !tfrt.chain)
  // CHECK-NEXT: int1 = 1
  %ch3 = tfrt.print.i1 %close, %ch2
  tfrt.return
}
