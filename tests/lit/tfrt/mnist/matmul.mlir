// RUN: bef_executor %s.bef | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's backends/cpu/mlir_tests/mnist/matmul.mlir: i32 and f32
// matmul against expected products stored in a BTF file, and a small benchmark.
// The data file is written by tests/lit/tfrt/mnist/Inputs/make_inputs.py.

// CHECK-LABEL: --- Running 'matmul_i32'
func.func @matmul_i32() {
  %ch0 = tfrt.new.chain
  %path = "tfrt_test.get_string"() { value = "tests/lit/tfrt/mnist/Inputs/matmul.btf" } : () -> !tfrt.string
  %zero = tfrt.constant.i32 0
  %one = tfrt.constant.i32 1
  %two = tfrt.constant.i32 2

  %a = "btf.read_dense_tensor.i32.2"(%path, %zero) : (!tfrt.string, i32) -> (!t.tensor)
  %b = "btf.read_dense_tensor.i32.2"(%path, %one) : (!tfrt.string, i32) -> (!t.tensor)
  %expected = "btf.read_dense_tensor.i32.2"(%path, %two) : (!tfrt.string, i32) -> (!t.tensor)

  %c = tfrt_dht.create_uninitialized_tensor.i32.2 [2 : i64, 2 : i64]
  %ch1 = tfrt_dht.fill_tensor_with_constant.i32 %c, %ch0 0 : i32
  %ch2 = "tfrt_test.matmul.i32.2"(%one, %a, %b, %zero, %c, %ch1) : (i32, !t.tensor, !t.tensor, i32, !t.tensor, !tfrt.chain) -> !tfrt.chain

  %eq, %ch3 = tfrt_dht.tensor_equal.i32 %c, %expected, %ch2
  // CHECK-NEXT: int1 = 1
  %ch4 = tfrt.print.i1 %eq, %ch3
  tfrt.return
}

// CHECK-LABEL: --- Running 'matmul_f32'
func.func @matmul_f32() {
  %ch0 = tfrt.new.chain
  %path = "tfrt_test.get_string"() { value = "tests/lit/tfrt/mnist/Inputs/matmul.btf" } : () -> !tfrt.string
  %i3 = tfrt.constant.i32 3
  %i4 = tfrt.constant.i32 4
  %i5 = tfrt.constant.i32 5
  %one = tfrt.constant.f32 1.0
  %zero = tfrt.constant.f32 0.0

  %a = "btf.read_dense_tensor.f32.2"(%path, %i3) : (!tfrt.string, i32) -> (!t.tensor)
  %b = "btf.read_dense_tensor.f32.2"(%path, %i4) : (!tfrt.string, i32) -> (!t.tensor)
  %expected = "btf.read_dense_tensor.f32.2"(%path, %i5) : (!tfrt.string, i32) -> (!t.tensor)

  %c = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 2 : i64]
  %ch1 = tfrt_dht.fill_tensor_with_constant.f32 %c, %ch0 0.0 : f32
  %ch2 = "tfrt_test.matmul.f32.2"(%one, %a, %b, %zero, %c, %ch1) : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain

  %close, %ch3 = "tfrt_dht.tensor_allclose.f32"(%c, %expected, %ch2) : (!t.tensor, !t.tensor, !tfrt.chain) -> (i1, !tfrt.chain)
  // CHECK-NEXT: int1 = 1
  %ch4 = tfrt.print.i1 %close, %ch3
  tfrt.return
}

// CHECK-LABEL: --- Running 'BM_matmul_f32'
func.func @BM_matmul_f32() {
  %ch0 = tfrt.new.chain
  %one = tfrt.constant.f32 1.0
  %zero = tfrt.constant.f32 0.0
  %a = tfrt_dht.create_uninitialized_tensor.f32.2 [8 : i64, 8 : i64]
  %ch1 = tfrt_dht.fill_tensor_with_constant.f32 %a, %ch0 1.0 : f32
  %c = tfrt_dht.create_uninitialized_tensor.f32.2 [8 : i64, 8 : i64]
  %ch2 = tfrt.merge.chains %ch1, %c : !tfrt.chain, !t.tensor

  // Deviation (keeps the suite fast): max_count = 10; the output is not checked.
  tfrt_test.benchmark "BM_matmul_f32"(%one : f32, %zero : f32, %a : !t.tensor, %c : !t.tensor, %ch2 : !tfrt.chain) duration_secs = 1, max_count = 10, num_warmup_runs = 1 {
    %ch3 = "tfrt_test.matmul.f32.2"(%one, %a, %a, %zero, %c, %ch2) : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain
    tfrt.return %ch3 : !tfrt.chain
  }
  tfrt.return
}
