// no_bef_translation
// RUN: tfrt_opt -tg-matmul-weight-layout %s | FileCheck %s

// A (k, 1024) float32 weight (a 4 KB row stride) is stored transposed and read with transpose_b.
// CHECK-LABEL: func.func @wide
func.func @wide(%x: tensor<?x2xf32>) -> tensor<?x1024xf32> {
  %w = "tg.constant"() {value = dense<1.5> : tensor<2x1024xf32>} : () -> tensor<2x1024xf32>
  %y = "tg.matmul"(%x, %w) : (tensor<?x2xf32>, tensor<2x1024xf32>) -> tensor<?x1024xf32>
  // CHECK-NOT: tensor<2x1024xf32>}
  // CHECK: %[[W:.*]] = "tg.constant"() {{.*}}tensor<1024x2xf32>
  // CHECK-NEXT: %[[Y:.*]] = "tg.matmul"(%arg0, %[[W]]) {{{.*}}transpose_b = true{{.*}}} : (tensor<?x2xf32>, tensor<1024x2xf32>) -> tensor<?x1024xf32>
  // CHECK-NEXT: func.return %[[Y]]
  func.return %y : tensor<?x1024xf32>
}

// The epilogue operands and attributes are kept.
// CHECK-LABEL: func.func @with_epilogue
func.func @with_epilogue(%x: tensor<3x2xf32>, %r: tensor<3x2048xf32>) -> tensor<3x2048xf32> {
  %w = "tg.constant"() {value = dense<0.5> : tensor<2x2048xf32>} : () -> tensor<2x2048xf32>
  %b = "tg.constant"() {value = dense<1.0> : tensor<2048xf32>} : () -> tensor<2048xf32>
  %y = "tg.matmul"(%x, %w, %b, %r) {activation = "gelu", epilogue_operands = [1, 1]} : (tensor<3x2xf32>, tensor<2x2048xf32>, tensor<2048xf32>, tensor<3x2048xf32>) -> tensor<3x2048xf32>
  // CHECK: "tg.matmul"(%arg0, %{{.*}}, %{{.*}}, %arg1) {{{.*}}activation = "gelu"{{.*}}transpose_b = true{{.*}}} : (tensor<3x2xf32>, tensor<2048x2xf32>, tensor<2048xf32>, tensor<3x2048xf32>) -> tensor<3x2048xf32>
  func.return %y : tensor<3x2048xf32>
}

// Left alone: a narrow weight, a row stride that is not a multiple of 4 KB, a weight with two
// users, one already transposed, and a float64 weight.
// CHECK-LABEL: func.func @unchanged
func.func @unchanged(%x: tensor<2x2xf32>, %z: tensor<2x1000xf32>, %d: tensor<2x2xf64>) -> (tensor<2x768xf32>, tensor<2x1100xf32>, tensor<2x1024xf32>, tensor<2x1024xf32>, tensor<2x1024xf32>, tensor<2x1024xf64>) {
  %w1 = "tg.constant"() {value = dense<1.0> : tensor<2x768xf32>} : () -> tensor<2x768xf32>
  %w2 = "tg.constant"() {value = dense<1.0> : tensor<2x1100xf32>} : () -> tensor<2x1100xf32>
  %w3 = "tg.constant"() {value = dense<1.0> : tensor<2x1024xf32>} : () -> tensor<2x1024xf32>
  %w4 = "tg.constant"() {value = dense<1.0> : tensor<1024x2xf32>} : () -> tensor<1024x2xf32>
  %w5 = "tg.constant"() {value = dense<1.0> : tensor<2x1024xf64>} : () -> tensor<2x1024xf64>
  %y1 = "tg.matmul"(%x, %w1) : (tensor<2x2xf32>, tensor<2x768xf32>) -> tensor<2x768xf32>
  %y2 = "tg.matmul"(%x, %w2) : (tensor<2x2xf32>, tensor<2x1100xf32>) -> tensor<2x1100xf32>
  %y3 = "tg.matmul"(%x, %w3) : (tensor<2x2xf32>, tensor<2x1024xf32>) -> tensor<2x1024xf32>
  %y4 = "tg.matmul"(%x, %w3) : (tensor<2x2xf32>, tensor<2x1024xf32>) -> tensor<2x1024xf32>
  %y5 = "tg.matmul"(%x, %w4) {transpose_b = true} : (tensor<2x2xf32>, tensor<1024x2xf32>) -> tensor<2x1024xf32>
  %y6 = "tg.matmul"(%d, %w5) : (tensor<2x2xf64>, tensor<2x1024xf64>) -> tensor<2x1024xf64>
  // CHECK: "tg.matmul"(%arg0, %{{.*}}) : (tensor<2x2xf32>, tensor<2x768xf32>)
  // CHECK-NEXT: "tg.matmul"(%arg0, %{{.*}}) : (tensor<2x2xf32>, tensor<2x1100xf32>)
  // CHECK-NEXT: "tg.matmul"(%arg0, %{{.*}}) : (tensor<2x2xf32>, tensor<2x1024xf32>)
  // CHECK-NEXT: "tg.matmul"(%arg0, %{{.*}}) : (tensor<2x2xf32>, tensor<2x1024xf32>)
  // CHECK-NEXT: "tg.matmul"(%arg0, %{{.*}}) {transpose_b = true} : (tensor<2x2xf32>, tensor<1024x2xf32>)
  // CHECK-NEXT: "tg.matmul"(%arg2, %{{.*}}) : (tensor<2x2xf64>, tensor<2x1024xf64>)
  func.return %y1, %y2, %y3, %y4, %y5, %y6 : tensor<2x768xf32>, tensor<2x1100xf32>, tensor<2x1024xf32>, tensor<2x1024xf32>, tensor<2x1024xf32>, tensor<2x1024xf64>
}
