// RUN: bef_executor --data_dir=. --data_dir=/tmp %s.bef 2>&1 | FileCheck %s --dump-input=fail
// (--data_dir: the data file is under the working directory; /tmp/invalid_path is allowed
// so that the missing file gives TFRT's own message; see docs/security.md.)

// Reconstruction of TFRT's backends/cpu/mlir_tests/mnist/btf_kernels.mlir:
// reading i32 tensors (including an empty [0] tensor) from a BTF file, and the invalid-path error.
// The data file is written by tests/lit/tfrt/mnist/Inputs/make_inputs.py.

// CHECK-LABEL: --- Running 'btf_read_i32'
func.func @btf_read_i32() {
  %ch0 = tfrt.new.chain
  %path = "tfrt_test.get_string"() { value = "tests/lit/tfrt/mnist/Inputs/test_tensor.btf" } : () -> !tfrt.string
  %zero = tfrt.constant.i32 0
  %one = tfrt.constant.i32 1

  %t0 = "btf.read_dense_tensor.i32.2"(%path, %zero) : (!tfrt.string, i32) -> (!t.tensor)
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [2, 2], values = [1, 2, 3, 4]
  %ch1 = tfrt_dht.print_tensor %t0, %ch0

  %t1 = "btf.read_dense_tensor.i32.1"(%path, %one) : (!tfrt.string, i32) -> (!t.tensor)
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [0], values = []
  %ch2 = tfrt_dht.print_tensor %t1, %ch1
  tfrt.return
}

// CHECK-LABEL: --- Running 'btf_invalid_path'
func.func @btf_invalid_path() -> !t.tensor {
  %path = "tfrt_test.get_string"() { value = "/tmp/invalid_path" } : () -> !tfrt.string
  %zero = tfrt.constant.i32 0
  // expected-error @+1 {{runtime error: failed to open file /tmp/invalid_path for reading}}
  %t = "btf.read_dense_tensor.i32.2"(%path, %zero) : (!tfrt.string, i32) -> (!t.tensor)
  // CHECK-NEXT: 'btf_invalid_path' returned <<error: failed to open file /tmp/invalid_path for reading>>
  tfrt.return %t : !t.tensor
}
