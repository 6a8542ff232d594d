// RUN: bef_executor %s.bef | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/tensor/string_host_tensor.mlir.

// CHECK-LABEL: --- Running 'basic'
func.func @basic() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = "tfrt_sht.create_tensor"() {shape = [2], values = ["string", "tensor"]} : () -> !t.tensor
  // CHECK-NEXT: StringHostTensor shape = [2], values = ["string", "tensor"]
  %ch1 = tfrt_dht.print_tensor %a, %ch0
  tfrt.return %ch1 : !tfrt.chain
}

// TFRT's main branch names the tensor type `!tfrt_tensor.tensor` (its dialect was `t`): both
// spellings are the one type, so values of either flow into the same kernels.
// CHECK-LABEL: --- Running 'renamed_type'
func.func @renamed_type() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = "tfrt_sht.create_tensor"() {shape = [1], values = ["renamed"]} : () -> !tfrt_tensor.tensor
  // CHECK-NEXT: StringHostTensor shape = [1], values = ["renamed"]
  %ch1 = "tfrt_dht.print_tensor"(%a, %ch0) : (!t.tensor, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1 : !tfrt.chain
}
