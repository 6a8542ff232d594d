module {
  func.func @main(%x: tensor<?x3xf32>, %scale: tensor<f32>) -> (tensor<?x2xf32>, tensor<?xi64>) attributes {tg.input_names = ["x", "scale"], tg.output_names = ["y", "label"]} {
    %w = "tg.constant"() {value = dense<[[1.0, -1.0], [2.0, 0.5], [0.0, 1.0]]> : tensor<3x2xf32>} : () -> tensor<3x2xf32>
    %b = "tg.constant"() {value = dense<[0.5, -4.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %y = "tg.matmul"(%x, %w) {transpose_a = false, transpose_b = false} : (tensor<?x3xf32>, tensor<3x2xf32>) -> tensor<?x2xf32>
    %z = "tg.add"(%y, %b) : (tensor<?x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
    %r = "tg.relu"(%z) : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %s = "tg.mul"(%r, %scale) : (tensor<?x2xf32>, tensor<f32>) -> tensor<?x2xf32>
    %l = "tg.argmax"(%s) {axis = 1, keepdims = false, output_type = "i64"} : (tensor<?x2xf32>) -> tensor<?xi64>
    func.return %s, %l : tensor<?x2xf32>, tensor<?xi64>
  }
}
