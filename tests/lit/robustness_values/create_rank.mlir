// RUN: not bef_executor %s.bef 2>&1 | FileCheck %s

// The rank suffix of tfrt_dht.create_uninitialized_tensor.T.R is an upper bound: a shape with
// more dimensions is an error at the kernel's own line and column; a shorter one is accepted,
// as TFRT's MNIST integration program relies on.

// CHECK-LABEL: --- Running 'shorter_shape'
func.func @shorter_shape() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = "tfrt_dht.create_uninitialized_tensor.f32.2"() {shape = [2 : i64]} : () -> !t.tensor
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [2], values = [0.000000e+00, 0.000000e+00]
  %ch1 = tfrt_dht.print_tensor %a, %ch0
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'longer_shape'
func.func @longer_shape() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  // CHECK: create_rank.mlir:[[# @LINE + 2]]:3: error: {{.*}}shape [2, 3] has 2 dimensions, more than the kernel's rank 1
  // CHECK: 'longer_shape' returned <<error: shape [2, 3] has 2 dimensions, more than the kernel's rank 1>>
  %a = "tfrt_dht.create_uninitialized_tensor.f32.1"() {shape = [2 : i64, 3 : i64]} : () -> !t.tensor
  %ch1 = tfrt_dht.print_tensor %a, %ch0
  tfrt.return %ch1 : !tfrt.chain
}
