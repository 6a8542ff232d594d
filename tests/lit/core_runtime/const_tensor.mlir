// RUN: bef_executor %s.bef | FileCheck %s

// CHECK-LABEL: --- Running 'const_dense'
func.func @const_dense() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = corert.const_dense_tensor dense<[0, 1, 2]> : tensor<3xi32>
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [3], values = [0, 1, 2]
  %ch1 = "corert.print_tensorhandle"(%a, %ch0) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  %b = corert.const_dense_tensor dense<1.5> : tensor<2x2xf32>
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [2, 2], values = [1.500000e+00, 1.500000e+00, 1.500000e+00, 1.500000e+00]
  %ch2 = "corert.print_tensorhandle"(%b, %ch1) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'const_string'
func.func @const_string() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = corert.const_string_tensor {shape = [2], value = ["string", "tensor"]}
  // CHECK-NEXT: StringHostTensor shape = [2], values = ["string", "tensor"]
  %ch1 = "corert.print_tensorhandle"(%a, %ch0) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  %b = corert.const_string_tensor {shape = [1, 2], value = ["const"]}
  // CHECK-NEXT: StringHostTensor shape = [1, 2], values = ["const", "const"]
  %ch2 = "corert.print_tensorhandle"(%b, %ch1) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'create_dense'
func.func @create_dense() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = corert.create_dense_tensor.ui64 {shape = [2], value = [1 : ui64, 2 : ui64]}
  // CHECK-NEXT: DenseHostTensor dtype = u64, shape = [2], values = [1, 2]
  %ch1 = "corert.print_tensorhandle"(%a, %ch0) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  %b = corert.create_dense_tensor.i1 {shape = [3], value = [true, false, true]}
  // CHECK-NEXT: DenseHostTensor dtype = i1, shape = [3], values = [1, 0, 1]
  %ch2 = "corert.print_tensorhandle"(%b, %ch1) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  %c = corert.create_dense_tensor.bf16 {shape = [1], value = [1.0 : bf16]}
  // CHECK-NEXT: DenseHostTensor dtype = bf16, shape = [1], values = [bf16(16256)]
  %ch3 = "corert.print_tensorhandle"(%c, %ch2) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch3 : !tfrt.chain
}
