// MNIST inference with a two-layer perceptron on DenseHostTensors: 100 images of 28x28 pixels,
// hidden layer of 512 ReLU units, 10 classes; prints the accuracy against the labels.
//
// The weights and images come from a BTF file written by examples/mnist/make_data.py (random
// weights; the labels are the model's own predictions except two, so the accuracy is 0.98).
// Run from the directory that holds examples/mnist/test_data:
//   python examples/mnist/make_data.py && bef_executor examples/mnist/mnist_inference.mlir

func.func @accuracy(%w1: !t.tensor, %b1: !t.tensor, %w2: !t.tensor, %b2: !t.tensor,
                    %images: !t.tensor, %labels: !t.tensor, %ch: !tfrt.chain) -> !t.tensor {
  %one = tfrt.constant.f32 1.0
  // hidden = relu(images x W1 + b1): the bias is broadcast into the output, then accumulated.
  %hidden_shape = ts.build_shape [100 : i64, 512 : i64]
  %hidden = "tfrt_test.broadcast.f32.2"(%b1, %hidden_shape, %ch) : (!t.tensor, !ts.shape, !tfrt.chain) -> !t.tensor
  %ch1 = "tfrt_test.matmul.f32.2"(%one, %images, %w1, %one, %hidden, %ch) : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain
  %ch2 = "tfrt_test.relu_inplace.f32"(%hidden, %ch1) : (!t.tensor, !tfrt.chain) -> !tfrt.chain
  // logits = hidden x W2 + b2
  %logit_shape = ts.build_shape [100 : i64, 10 : i64]
  %logits = "tfrt_test.broadcast.f32.2"(%b2, %logit_shape, %ch) : (!t.tensor, !ts.shape, !tfrt.chain) -> !t.tensor
  %ch3 = "tfrt_test.matmul.f32.2"(%one, %hidden, %w2, %one, %logits, %ch2) : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // correct[i] = (argmax(logits[i]) == labels[i]), then its mean.
  %predicted = "tfrt_test.argmax.f32.2"(%logits, %ch3) : (!t.tensor, !tfrt.chain) -> !t.tensor
  %ch4 = "tfrt_test.equal_inplace.i32"(%labels, %predicted, %ch3) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  %correct = tfrt_dht.create_uninitialized_tensor.f32.1 [100 : i64]
  %ch5 = "tfrt_test.cast.i32_to_f32"(%predicted, %correct, %ch4) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  %mean = "tfrt_test.reduce_mean.f32.1"(%correct, %ch5) : (!t.tensor, !tfrt.chain) -> !t.tensor
  tfrt.return %mean : !t.tensor
}

func.func @mnist_inference() -> !tfrt.chain {
  %file = "tfrt_test.get_string"() { value = "examples/mnist/test_data/mnist_tensors.btf" } : () -> !tfrt.string
  %i0 = tfrt.constant.i32 0
  %i1 = tfrt.constant.i32 1
  %i2 = tfrt.constant.i32 2
  %i3 = tfrt.constant.i32 3
  %i4 = tfrt.constant.i32 4
  %i5 = tfrt.constant.i32 5
  %w1 = "btf.read_dense_tensor.f32.2"(%file, %i0) : (!tfrt.string, i32) -> !t.tensor
  %b1 = "btf.read_dense_tensor.f32.1"(%file, %i1) : (!tfrt.string, i32) -> !t.tensor
  %w2 = "btf.read_dense_tensor.f32.2"(%file, %i2) : (!tfrt.string, i32) -> !t.tensor
  %b2 = "btf.read_dense_tensor.f32.1"(%file, %i3) : (!tfrt.string, i32) -> !t.tensor
  %images = "btf.read_dense_tensor.f32.2"(%file, %i4) : (!tfrt.string, i32) -> !t.tensor
  %labels = "btf.read_dense_tensor.i32.1"(%file, %i5) : (!tfrt.string, i32) -> !t.tensor
  %ch0 = tfrt.new.chain
  %acc = tfrt.call @accuracy(%w1, %b1, %w2, %b2, %images, %labels, %ch0)
      : (!t.tensor, !t.tensor, !t.tensor, !t.tensor, !t.tensor, !t.tensor, !tfrt.chain) -> !t.tensor
  %ch1 = tfrt_dht.print_tensor %acc, %ch0
  tfrt.return %ch1 : !tfrt.chain
}
