// Uses the kernels of my_kernels.py.
// Run: bef_executor --kernels examples/custom_kernel/my_kernels.py examples/custom_kernel/use_my_kernels.mlir
func.func @scale() -> i32 {
  %x = tfrt.constant.i32 14
  %y = "my.scale.i32"(%x) {factor = 3 : i32} : (i32) -> i32
  tfrt.return %y : i32
}

func.func @leaky_relu() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %t = tfrt_dht.create_uninitialized_tensor.f32.1 [4 : i64]
  %ch1 = tfrt_dht.set_tensor_with_constant_values.f32 %t, %ch0
      [-2.0 : f32, -1.0 : f32, 0.5 : f32, 3.0 : f32]
  %ch2 = "my.leaky_relu_inplace.f32"(%t, %ch1) {alpha = 0.1 : f32} : (!t.tensor, !tfrt.chain) -> !tfrt.chain
  %ch3 = tfrt_dht.print_tensor %t, %ch2
  tfrt.return %ch3 : !tfrt.chain
}
