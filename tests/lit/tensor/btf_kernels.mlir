// RUN: bef_executor %s.bef 2>&1 | FileCheck %s

// BTF reading (docs/conformance.md): Inputs/test_tensor.btf holds [[1, 2], [3, 4]], [0, 1, 2, 3, 4]
// and an empty [0] tensor, all i32 (written by Inputs/make_inputs.py).

// CHECK-LABEL: --- Running 'tensor_io'
func.func @tensor_io() {
  %c0 = tfrt.new.chain
  %path = "tfrt_test.get_string"() { value = "tests/lit/tensor/Inputs/test_tensor.btf" } : () -> !tfrt.string
  %zero = tfrt.constant.i32 0
  %one = tfrt.constant.i32 1
  %two = tfrt.constant.i32 2
  %t0 = "btf.read_dense_tensor.i32.2"(%path, %zero) : (!tfrt.string, i32) -> (!t.tensor)
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [2, 2], values = [1, 2, 3, 4]
  %c1 = tfrt_dht.print_tensor %t0, %c0
  %t1 = "btf.read_dense_tensor.i32.1"(%path, %one) : (!tfrt.string, i32) -> (!t.tensor)
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [5], values = [0, 1, 2, 3, 4]
  %c2 = tfrt_dht.print_tensor %t1, %c1
  %t2 = "btf.read_dense_tensor.i32.1"(%path, %two) : (!tfrt.string, i32) -> (!t.tensor)
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [0], values = []
  %c3 = tfrt_dht.print_tensor %t2, %c2
  tfrt.return
}

// CHECK-LABEL: --- Running 'tensor_io_errors'
func.func @tensor_io_errors() {
  %c0 = tfrt.new.chain
  %bad = "tfrt_test.get_string"() { value = "/tmp/invalid_path" } : () -> !tfrt.string
  %path = "tfrt_test.get_string"() { value = "tests/lit/tensor/Inputs/test_tensor.btf" } : () -> !tfrt.string
  %zero = tfrt.constant.i32 0
  %five = tfrt.constant.i32 5
  // expected-error @+1 {{runtime error: failed to open file /tmp/invalid_path for reading}}
  %t0 = "btf.read_dense_tensor.i32.2"(%bad, %zero) : (!tfrt.string, i32) -> (!t.tensor)
  // expected-error @+1 {{runtime error: invalid tensor index 5 to read tensor from path tests/lit/tensor/Inputs/test_tensor.btf which contains 3 tensors}}
  %t1 = "btf.read_dense_tensor.i32.2"(%path, %five) : (!tfrt.string, i32) -> (!t.tensor)
  // expected-error @+1 {{runtime error: unexpected tensor dtype i32. Expected dtype is f32}}
  %t2 = "btf.read_dense_tensor.f32.2"(%path, %zero) : (!tfrt.string, i32) -> (!t.tensor)
  // expected-error @+1 {{runtime error: unexpected tensor rank 2. Expected rank is 1}}
  %t3 = "btf.read_dense_tensor.i32.1"(%path, %zero) : (!tfrt.string, i32) -> (!t.tensor)
  tfrt.return
}
// CHECK-NOT: error
