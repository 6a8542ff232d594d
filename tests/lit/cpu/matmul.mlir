// RUN: bef_executor %s.bef 2>&1 | FileCheck %s

// eigen.matmul / tfrt_test.matmul against expected products stored in Inputs/matmul.btf
// (written by tests/lit/tensor/Inputs/make_inputs.py), non-finite prints and shape errors.

// CHECK-LABEL: --- Running 'matmul_i32'
func.func @matmul_i32() {
  %ch0 = tfrt.new.chain
  %path = "tfrt_test.get_string"() { value = "tests/lit/cpu/Inputs/matmul.btf" } : () -> !tfrt.string
  %i0 = tfrt.constant.i32 0
  %i1 = tfrt.constant.i32 1
  %i2 = tfrt.constant.i32 2
  %a = "btf.read_dense_tensor.i32.2"(%path, %i0) : (!tfrt.string, i32) -> (!t.tensor)
  %b = "btf.read_dense_tensor.i32.2"(%path, %i1) : (!tfrt.string, i32) -> (!t.tensor)
  %expected = "btf.read_dense_tensor.i32.2"(%path, %i2) : (!tfrt.string, i32) -> (!t.tensor)
  %c = tfrt_dht.create_uninitialized_tensor.i32.2 [4 : i64, 5 : i64]
  %ch1 = "eigen.matmul.i32"(%i1, %a, %b, %i0, %c, %ch0) : (i32, !t.tensor, !t.tensor, i32, !t.tensor, !tfrt.chain) -> !tfrt.chain
  %eq, %ch2 = tfrt_dht.tensor_equal.i32 %c, %expected, %ch1
  // CHECK-NEXT: int1 = 1
  %ch3 = tfrt.print.i1 %eq, %ch2
  tfrt.return
}

// CHECK-LABEL: --- Running 'matmul_f32'
func.func @matmul_f32() {
  %ch0 = tfrt.new.chain
  %path = "tfrt_test.get_string"() { value = "tests/lit/cpu/Inputs/matmul.btf" } : () -> !tfrt.string
  %i3 = tfrt.constant.i32 3
  %i4 = tfrt.constant.i32 4
  %i5 = tfrt.constant.i32 5
  %one = tfrt.constant.f32 1.0
  %zero = tfrt.constant.f32 0.0
  %a = "btf.read_dense_tensor.f32.2"(%path, %i3) : (!tfrt.string, i32) -> (!t.tensor)
  %b = "btf.read_dense_tensor.f32.2"(%path, %i4) : (!tfrt.string, i32) -> (!t.tensor)
  %expected = "btf.read_dense_tensor.f32.2"(%path, %i5) : (!tfrt.string, i32) -> (!t.tensor)
  %c = tfrt_dht.create_uninitialized_tensor.f32.2 [4 : i64, 5 : i64]
  %ch1 = "tfrt_test.matmul.f32.2"(%one, %a, %b, %zero, %c, %ch0) : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain
  %close, %ch2 = "tfrt_dht.tensor_allclose.f32"(%c, %expected, %ch1) : (!t.tensor, !t.tensor, !tfrt.chain) -> (i1, !tfrt.chain)
  // CHECK-NEXT: int1 = 1
  %ch3 = tfrt.print.i1 %close, %ch2
  tfrt.return
}

// CHECK-LABEL: --- Running 'non_finite'
func.func @non_finite() {
  %ch0 = tfrt.new.chain
  %ten = tfrt.constant.f32 10.0
  %one = tfrt.constant.f32 1.0
  %minus_one = tfrt.constant.f32 -1.0
  %zero = tfrt.constant.f32 0.0
  %big = tfrt_dht.create_uninitialized_tensor.f32.2 [1 : i64, 2 : i64]
  %ch1 = tfrt_dht.set_tensor_with_constant_values.f32 %big, %ch0 [3.0e+38 : f32, -3.0e+38 : f32]
  %eye = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 2 : i64]
  %ch2 = tfrt_dht.set_tensor_with_constant_values.f32 %eye, %ch1 [1.0 : f32, 0.0 : f32, 0.0 : f32, 1.0 : f32]
  %c = tfrt_dht.create_uninitialized_tensor.f32.2 [1 : i64, 2 : i64]
  %ch3 = "eigen.matmul.f32"(%ten, %big, %eye, %zero, %c, %ch2) : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [1, 2], values = [INF, -INF]
  %ch4 = tfrt_dht.print_tensor %c, %ch3
  %ch5 = "eigen.matmul.f32"(%ten, %big, %eye, %minus_one, %c, %ch4) : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [1, 2], values = [nan, nan]
  %ch6 = tfrt_dht.print_tensor %c, %ch5
  tfrt.return
}

// CHECK-LABEL: --- Running 'matmul_errors'
func.func @matmul_errors() {
  %ch0 = tfrt.new.chain
  %one = tfrt.constant.f32 1.0
  %a = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 3 : i64]
  %b = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 2 : i64]
  %c = tfrt_dht.create_uninitialized_tensor.f32.2 [3 : i64, 3 : i64]
  // expected-error @+1 {{runtime error: MatMul input tensors inner dimension mismatch: [2, 3] vs. [2, 2]}}
  %ch1 = "eigen.matmul.f32"(%one, %a, %b, %one, %b, %ch0) : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // expected-error @+1 {{runtime error: MatMul output shape [3, 3] does not match product shape of inputs: [2, 2] * [2, 2]}}
  %ch2 = "eigen.matmul.f32"(%one, %b, %b, %one, %c, %ch0) : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain
  tfrt.return
}
// CHECK-NOT: error
