// XOR inference: the playground's pretrained 2-2-1 MLP (examples/mlp_xor/README.md), in the current syntax.
//
// Run:   bef_executor examples/mlp_xor/xor_inference.mlir
// Prints the four predictions, close to [0, 1, 1, 0].
func.func @xor_inference() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %one = tfrt.constant.f32 1.0

  // Inputs: the four rows [0,0], [0,1], [1,0], [1,1].
  %inputs = tfrt_dht.create_uninitialized_tensor.f32.2 [4 : i64, 2 : i64]
  %ch1 = tfrt_dht.set_tensor_with_constant_values.f32 %inputs, %ch0
      [0.0 : f32, 0.0 : f32, 0.0 : f32, 1.0 : f32, 1.0 : f32, 0.0 : f32, 1.0 : f32, 1.0 : f32]

  // Pretrained parameters.
  %hidden_weights = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 2 : i64]
  %ch2 = tfrt_dht.set_tensor_with_constant_values.f32 %hidden_weights, %ch0
      [4.11206598 : f32, 6.20361774 : f32, 4.10740065 : f32, 6.18121127 : f32]
  %hidden_bias = tfrt_dht.create_uninitialized_tensor.f32.1 [2 : i64]
  %ch3 = tfrt_dht.set_tensor_with_constant_values.f32 %hidden_bias, %ch0
      [-6.30204227 : f32, -2.67542759 : f32]
  %output_weights = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 1 : i64]
  %ch4 = tfrt_dht.set_tensor_with_constant_values.f32 %output_weights, %ch0
      [-9.17221319 : f32, 8.46304139 : f32]
  %output_bias = tfrt_dht.create_uninitialized_tensor.f32.1 [1 : i64]
  %ch5 = tfrt_dht.set_tensor_with_constant_values.f32 %output_bias, %ch0 [-3.85270514 : f32]
  %ready = tfrt.merge.chains %ch1, %ch2, %ch3, %ch4, %ch5
      : !tfrt.chain, !tfrt.chain, !tfrt.chain, !tfrt.chain, !tfrt.chain

  // Hidden layer: sigmoid(inputs @ hidden_weights + hidden_bias).
  %hidden_shape = ts.build_shape [4 : i64, 2 : i64]
  %hidden = "tfrt_test.broadcast.f32.2"(%hidden_bias, %hidden_shape, %ready)
      : (!t.tensor, !ts.shape, !tfrt.chain) -> !t.tensor
  %ch6 = "eigen.matmul.f32"(%one, %inputs, %hidden_weights, %one, %hidden, %ready)
      : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain
  %ch7 = "sigmoid_inplace.f32"(%hidden, %ch6) : (!t.tensor, !tfrt.chain) -> !tfrt.chain

  // Output layer: sigmoid(hidden @ output_weights + output_bias).
  %output_shape = ts.build_shape [4 : i64, 1 : i64]
  %output = "tfrt_test.broadcast.f32.2"(%output_bias, %output_shape, %ch7)
      : (!t.tensor, !ts.shape, !tfrt.chain) -> !t.tensor
  %ch8 = "eigen.matmul.f32"(%one, %hidden, %output_weights, %one, %output, %ch7)
      : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain
  %ch9 = "sigmoid_inplace.f32"(%output, %ch8) : (!t.tensor, !tfrt.chain) -> !tfrt.chain

  %ch10 = tfrt_dht.print_tensor %output, %ch9
  tfrt.return %ch10 : !tfrt.chain
}
