// The playground's XOR MLP (examples/mlp_xor/README.md), reconstructed in its 2020 syntax.
func @test_sigmoid() {
  %c0 = hex.new.chain
  %t = "dht.create_uninitialized_tensor.f32.2"() {shape = [2 : i64]} : () -> !t.tensor
  %c1 = "dht.set_tensor_with_constant_values.f32"(%t, %c0) {values = [-1.0 : f32, 2.0 : f32]} : (!t.tensor, !hex.chain) -> !hex.chain
  %c2 = "sigmoid_inplace.f32"(%t, %c1) : (!t.tensor, !hex.chain) -> !hex.chain
  %c3 = dht.print_tensor %t, %c2
  hex.return
}

func @test_sigmoid_gradient() {
  %c0 = hex.new.chain
  %t = "dht.create_uninitialized_tensor.f32.2"() {shape = [2 : i64]} : () -> !t.tensor
  %gradient = "dht.create_uninitialized_tensor.f32.2"() {shape = [2 : i64]} : () -> !t.tensor
  %c1 = "dht.set_tensor_with_constant_values.f32"(%t, %c0) {values = [-1.0 : f32, 2.0 : f32]} : (!t.tensor, !hex.chain) -> !hex.chain
  %c2 = "sigmoid_inplace.f32"(%t, %c1) : (!t.tensor, !hex.chain) -> !hex.chain
  %c3 = "sigmoid_grad_inplace.f32"(%t, %gradient, %c1) : (!t.tensor, !t.tensor, !hex.chain) -> !hex.chain
  %c4 = dht.print_tensor %gradient, %c3
  hex.return
}

func @xor_inference() {
  %c0 = hex.new.chain
  %one = hex.constant.f32 1.0
  %inputs = "dht.create_uninitialized_tensor.f32.2"() {shape = [4 : i64, 2 : i64]} : () -> !t.tensor
  %c1 = "dht.set_tensor_with_constant_values.f32"(%inputs, %c0) {values = [0.0 : f32, 0.0 : f32, 0.0 : f32, 1.0 : f32, 1.0 : f32, 0.0 : f32, 1.0 : f32, 1.0 : f32]} : (!t.tensor, !hex.chain) -> !hex.chain
  %hidden_weights = "dht.create_uninitialized_tensor.f32.2"() {shape = [2 : i64, 2 : i64]} : () -> !t.tensor
  %c2 = "dht.set_tensor_with_constant_values.f32"(%hidden_weights, %c0) {values = [4.11206598 : f32, 6.20361774 : f32, 4.10740065 : f32, 6.18121127 : f32]} : (!t.tensor, !hex.chain) -> !hex.chain
  %hidden_bias = "dht.create_uninitialized_tensor.f32.1"() {shape = [2 : i64]} : () -> !t.tensor
  %c3 = "dht.set_tensor_with_constant_values.f32"(%hidden_bias, %c0) {values = [-6.30204227 : f32, -2.67542759 : f32]} : (!t.tensor, !hex.chain) -> !hex.chain
  %output_weights = "dht.create_uninitialized_tensor.f32.2"() {shape = [2 : i64, 1 : i64]} : () -> !t.tensor
  %c4 = "dht.set_tensor_with_constant_values.f32"(%output_weights, %c0) {values = [-9.17221319 : f32, 8.46304139 : f32]} : (!t.tensor, !hex.chain) -> !hex.chain
  %output_bias = "dht.create_uninitialized_tensor.f32.2"() {shape = [1 : i64, 1 : i64]} : () -> !t.tensor
  %c5 = "dht.set_tensor_with_constant_values.f32"(%output_bias, %c0) {values = [-3.85270514 : f32]} : (!t.tensor, !hex.chain) -> !hex.chain
  %lr = "dht.create_uninitialized_tensor.f32.1"() {shape = [1 : i64]} : () -> !t.tensor
  %c6 = dht.fill_tensor_with_constant.f32 %lr, %c0 0.2 : f32
  %c8 = hex.merge.chains %c1, %c2, %c3, %c4, %c5, %c6
  %hidden_shape = ts.build_shape [4 : i64, 2 : i64]
  %hidden = "tfrt_test.broadcast.f32.2"(%hidden_bias, %hidden_shape, %c8) : (!t.tensor, !ts.shape, !hex.chain) -> !t.tensor
  %c9 = "eigen.matmul.f32"(%one, %inputs, %hidden_weights, %one, %hidden, %c8) : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !hex.chain) -> !hex.chain
  %c10 = "sigmoid_inplace.f32"(%hidden, %c9) : (!t.tensor, !hex.chain) -> !hex.chain
  %output_shape = ts.build_shape [4 : i64, 1 : i64]
  %output = "tfrt_test.broadcast.f32.2"(%output_bias, %output_shape, %c10) : (!t.tensor, !ts.shape, !hex.chain) -> !t.tensor
  %c11 = "eigen.matmul.f32"(%one, %hidden, %output_weights, %one, %output, %c10) : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !hex.chain) -> !hex.chain
  %c12 = "sigmoid_inplace.f32"(%output, %c11) : (!t.tensor, !hex.chain) -> !hex.chain
  %c13 = dht.print_tensor %output, %c12
  hex.return
}
