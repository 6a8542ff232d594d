// XOR training, written as a TFRT program -- in the 2020 syntax of the original playground
// (`func`, `hex.*`, `!hex.chain`, `dht.*`, untyped `hex.merge.chains`). Same program as
// xor_training.mlir, which uses the later spelling.
//
// A 2-2-1 multi-layer perceptron with sigmoid activations learns XOR by full-batch gradient
// descent on the mean squared error.  Forward pass, backward pass (the chain rule through both
// sigmoids) and the SGD updates are kernels; a `hex.repeat.i32` loop runs the training steps.
//
// Run:   bef_executor --functions=xor_training examples/mlp_xor/xor_training_2020.mlir
// Line-by-line explanation: examples/mlp_xor/README.md.

// The forward pass, shared by the training loop and the final evaluation:
//   h = sigmoid(x @ wh + bh),  o = sigmoid(h @ wo + bo).
// Returns a chain that is ready when `o` is computed, the hidden activations and the output.
func @mlp_forward(%ch: !hex.chain, %x: !t.tensor, %wh: !t.tensor, %bh: !t.tensor,
                       %wo: !t.tensor, %bo: !t.tensor) -> (!hex.chain, !t.tensor, !t.tensor) {
  %one = hex.constant.f32 1.0
  %hidden_shape = ts.build_shape [4 : i64, 2 : i64]
  %output_shape = ts.build_shape [4 : i64, 1 : i64]

  // h = x @ wh + bh: start from the bias repeated on every row, then accumulate the product.
  %h = "tfrt_test.broadcast.f32.2"(%bh, %hidden_shape, %ch)
      : (!t.tensor, !ts.shape, !hex.chain) -> !t.tensor
  %ch1 = "eigen.matmul.f32"(%one, %x, %wh, %one, %h, %ch)
      : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !hex.chain) -> !hex.chain
  %ch2 = "sigmoid_inplace.f32"(%h, %ch1) : (!t.tensor, !hex.chain) -> !hex.chain

  // o = h @ wo + bo, then the output sigmoid.
  %o = "tfrt_test.broadcast.f32.2"(%bo, %output_shape, %ch)
      : (!t.tensor, !ts.shape, !hex.chain) -> !t.tensor
  %ch3 = "eigen.matmul.f32"(%one, %h, %wo, %one, %o, %ch2)
      : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !hex.chain) -> !hex.chain
  %ch4 = "sigmoid_inplace.f32"(%o, %ch3) : (!t.tensor, !hex.chain) -> !hex.chain
  hex.return %ch4, %h, %o : !hex.chain, !t.tensor, !t.tensor
}

func @xor_training() -> !hex.chain {
  %ch0 = hex.new.chain

  // The four XOR examples and their labels.
  %x = dht.create_uninitialized_tensor.f32.2 [4 : i64, 2 : i64]
  %ch1 = dht.set_tensor_with_constant_values.f32 %x, %ch0
      [0.0 : f32, 0.0 : f32, 0.0 : f32, 1.0 : f32, 1.0 : f32, 0.0 : f32, 1.0 : f32, 1.0 : f32]
  %y = dht.create_uninitialized_tensor.f32.2 [4 : i64, 1 : i64]
  %ch2 = dht.set_tensor_with_constant_values.f32 %y, %ch0
      [0.0 : f32, 1.0 : f32, 1.0 : f32, 0.0 : f32]
  // x transposed, used by every hidden-weight gradient.
  %xt = dht.create_uninitialized_tensor.f32.2 [2 : i64, 4 : i64]
  %ch3 = "tfrt_test.tensor_transpose.f32"(%x, %xt, %ch1)
      : (!t.tensor, !t.tensor, !hex.chain) -> !hex.chain

  // Parameters: weights drawn once from U(-1, 1) (NumPy seed 0), biases zero.
  %wh = dht.create_uninitialized_tensor.f32.2 [2 : i64, 2 : i64]
  %ch4 = dht.set_tensor_with_constant_values.f32 %wh, %ch0
      [0.27 : f32, -0.46 : f32, -0.92 : f32, -0.97 : f32]
  %bh = dht.create_uninitialized_tensor.f32.1 [2 : i64]
  %ch5 = dht.fill_tensor_with_constant.f32 %bh, %ch0 0.0 : f32
  %wo = dht.create_uninitialized_tensor.f32.2 [2 : i64, 1 : i64]
  %ch6 = dht.set_tensor_with_constant_values.f32 %wo, %ch0 [0.63 : f32, 0.83 : f32]
  %bo = dht.create_uninitialized_tensor.f32.1 [1 : i64]
  %ch7 = dht.fill_tensor_with_constant.f32 %bo, %ch0 0.0 : f32

  // Learning rate for the bias updates (gradient_descent: b -= lr * g).
  %lr = dht.create_uninitialized_tensor.f32.1 [1 : i64]
  %ch8 = dht.fill_tensor_with_constant.f32 %lr, %ch0 8.0 : f32

  %ready = hex.merge.chains %ch2, %ch3, %ch4, %ch5, %ch6, %ch7, %ch8
  %steps = hex.constant.i32 2000
  %step0 = hex.constant.i32 0

  // The training loop. A region cannot capture outer values, so everything it uses is a
  // loop-carried value; the tensors are updated in place and passed through unchanged.
  %trained:10 = hex.repeat.i32 %steps, %ready, %x, %xt, %y, %wh, %bh, %wo, %bo, %lr, %step0
      : !hex.chain, !t.tensor, !t.tensor, !t.tensor, !t.tensor, !t.tensor, !t.tensor,
        !t.tensor, !t.tensor, i32 {
    %one = hex.constant.f32 1.0
    %zero = hex.constant.f32 0.0
    // -lr / 4: the weight gradients are batch sums, so this makes them batch means.
    %minus_lr_mean = hex.constant.f32 -2.0

    // Forward pass.
    %fwd_ch, %h, %o = hex.call @mlp_forward(%ready, %x, %wh, %bh, %wo, %bo)
        : (!hex.chain, !t.tensor, !t.tensor, !t.tensor, !t.tensor, !t.tensor)
        -> (!hex.chain, !t.tensor, !t.tensor)

    // Every 200 steps, print the loss.
    %loss = "mlp.mse_loss.f32"(%o, %y, %fwd_ch) : (!t.tensor, !t.tensor, !hex.chain) -> f32
    %one_i = hex.constant.i32 1
    %step = hex.add.i32 %step0, %one_i
    %every = hex.constant.i32 200
    %quotient, %remainder = hex.div.i32 %step, %every
    %zero_i = hex.constant.i32 0
    %due = hex.equal.i32 %remainder, %zero_i
    %print_ch = hex.if %due, %fwd_ch, %step, %loss : (!hex.chain, i32, f32) -> (!hex.chain) {
      %printed = "mlp.print_progress"(%step, %loss, %fwd_ch) : (i32, f32, !hex.chain) -> !hex.chain
      hex.return %printed : !hex.chain
    } else {
      hex.return %fwd_ch : !hex.chain
    }

    // Backward pass. dL/do = o - y (the constant 2/N of the MSE is folded into the rate).
    %g = dht.create_uninitialized_tensor.f32.2 [4 : i64, 1 : i64]
    %b1 = "tfrt_test.flatten.f32"(%o, %g, %fwd_ch) : (!t.tensor, !t.tensor, !hex.chain) -> !hex.chain
    %b2 = "tfrt_test.subtract_inplace.f32"(%y, %g, %b1)
        : (!t.tensor, !t.tensor, !hex.chain) -> !hex.chain
    // Through the output sigmoid: dz_o = (o - y) * o * (1 - o).
    %local_o = dht.create_uninitialized_tensor.f32.2 [4 : i64, 1 : i64]
    %b3 = "sigmoid_grad_inplace.f32"(%o, %local_o, %fwd_ch)
        : (!t.tensor, !t.tensor, !hex.chain) -> !hex.chain
    %b4 = hex.merge.chains %b2, %b3
    %b5 = "mlp.multiply_inplace.f32"(%local_o, %g, %b4)
        : (!t.tensor, !t.tensor, !hex.chain) -> !hex.chain

    // Back to the hidden layer, with wo as it was before its update: dh = dz_o @ wo^T.
    %wot = dht.create_uninitialized_tensor.f32.2 [1 : i64, 2 : i64]
    %b6 = "tfrt_test.tensor_transpose.f32"(%wo, %wot, %fwd_ch)
        : (!t.tensor, !t.tensor, !hex.chain) -> !hex.chain
    %dh = dht.create_uninitialized_tensor.f32.2 [4 : i64, 2 : i64]
    %b7 = hex.merge.chains %b5, %b6
    %b8 = "eigen.matmul.f32"(%one, %g, %wot, %zero, %dh, %b7)
        : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !hex.chain) -> !hex.chain

    // Output layer update: wo -= lr/4 * h^T @ dz_o, bo -= lr * mean(dz_o).
    %ht = dht.create_uninitialized_tensor.f32.2 [2 : i64, 4 : i64]
    %b9 = "tfrt_test.tensor_transpose.f32"(%h, %ht, %fwd_ch)
        : (!t.tensor, !t.tensor, !hex.chain) -> !hex.chain
    %b10 = hex.merge.chains %b7, %b9
    %u1 = "eigen.matmul.f32"(%minus_lr_mean, %ht, %g, %one, %wo, %b10)
        : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !hex.chain) -> !hex.chain
    %grad_bo = dht.create_uninitialized_tensor.f32.1 [1 : i64]
    %b11 = "tfrt_test.mean_axis_zero.f32"(%g, %grad_bo, %b5)
        : (!t.tensor, !t.tensor, !hex.chain) -> !hex.chain
    %u2 = "tfrt_test.gradient_descent.f32"(%grad_bo, %lr, %bo, %b11)
        : (!t.tensor, !t.tensor, !t.tensor, !hex.chain) -> !hex.chain

    // Through the hidden sigmoid: dz_h = dh * h * (1 - h).
    %local_h = dht.create_uninitialized_tensor.f32.2 [4 : i64, 2 : i64]
    %b12 = "sigmoid_grad_inplace.f32"(%h, %local_h, %fwd_ch)
        : (!t.tensor, !t.tensor, !hex.chain) -> !hex.chain
    %b13 = hex.merge.chains %b8, %b12
    %b14 = "mlp.multiply_inplace.f32"(%local_h, %dh, %b13)
        : (!t.tensor, !t.tensor, !hex.chain) -> !hex.chain

    // Hidden layer update: wh -= lr/4 * x^T @ dz_h, bh -= lr * mean(dz_h).
    %u3 = "eigen.matmul.f32"(%minus_lr_mean, %xt, %dh, %one, %wh, %b14)
        : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !hex.chain) -> !hex.chain
    %grad_bh = dht.create_uninitialized_tensor.f32.1 [2 : i64]
    %b15 = "tfrt_test.mean_axis_zero.f32"(%dh, %grad_bh, %b14)
        : (!t.tensor, !t.tensor, !hex.chain) -> !hex.chain
    %u4 = "tfrt_test.gradient_descent.f32"(%grad_bh, %lr, %bh, %b15)
        : (!t.tensor, !t.tensor, !t.tensor, !hex.chain) -> !hex.chain

    // The next step starts when every update and the progress print are done.
    %done = hex.merge.chains %u1, %u2, %u3, %u4, %print_ch
    hex.return %done, %x, %xt, %y, %wh, %bh, %wo, %bo, %lr, %step
        : !hex.chain, !t.tensor, !t.tensor, !t.tensor, !t.tensor, !t.tensor, !t.tensor,
          !t.tensor, !t.tensor, i32
  }

  // Evaluate the trained network on the four examples.
  %eval_ch, %eval_h, %prediction = hex.call @mlp_forward(%trained#0, %x, %trained#4, %trained#5,
      %trained#6, %trained#7)
      : (!hex.chain, !t.tensor, !t.tensor, !t.tensor, !t.tensor, !t.tensor)
      -> (!hex.chain, !t.tensor, !t.tensor)
  %p1 = dht.print_tensor %prediction, %eval_ch
  %p2 = "mlp.print_accuracy.f32"(%prediction, %y, %p1) : (!t.tensor, !t.tensor, !hex.chain) -> !hex.chain
  hex.return %p2 : !hex.chain
}
