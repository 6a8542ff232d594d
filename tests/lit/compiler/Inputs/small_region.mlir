// A model whose ops form one small-graph region (tg.fused_graph) after the default pipeline.
func.func @main(%x: tensor<4x2xf32>, %w: tensor<2x3xf32>) -> (tensor<3xf32>, tensor<4x3xf32>) {
  %y = "tg.matmul"(%x, %w) {transpose_a = false, transpose_b = false} : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %b = "tg.constant"() {value = dense<0.5> : tensor<3xf32>} : () -> tensor<3xf32>
  %z = "tg.add"(%y, %b) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %s = "tg.sigmoid"(%z) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %r = "tg.reduce_sum"(%s) {axes = [0], keepdims = false} : (tensor<4x3xf32>) -> tensor<3xf32>
  func.return %r, %s : tensor<3xf32>, tensor<4x3xf32>
}
