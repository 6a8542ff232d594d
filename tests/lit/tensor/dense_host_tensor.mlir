// RUN: bef_executor %s.bef 2>&1 | FileCheck %s

// DenseHostTensor kernels and print formats (docs/conformance.md).

// CHECK-LABEL: --- Running 'print_formats'
func.func @print_formats() {
  %ch0 = tfrt.new.chain
  %a = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 2 : i64]
  %ch1 = tfrt_dht.set_tensor_with_constant_values.f32 %a, %ch0 [1.0 : f32, -2.5 : f32, 1.0e-07 : f32, 123456.0 : f32]
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [2, 2], values = [1.000000e+00, -2.500000e+00, 1.000000e-07, 1.234560e+05]
  %ch2 = tfrt_dht.print_tensor %a, %ch1

  %b = tfrt_dht.create_uninitialized_tensor.i32.1 [17 : i64]
  %ch3 = tfrt_dht.fill_tensor_with_constant.i32 %b, %ch2 7 : i32
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [17], values = [7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, ... ]
  %ch4 = tfrt_dht.print_tensor %b, %ch3

  %c = tfrt_dht.create_uninitialized_tensor.f32.0 []
  %ch5 = tfrt_dht.fill_tensor_with_constant.f32 %c, %ch4 2.0 : f32
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [], values = [2.000000e+00]
  %ch6 = tfrt_dht.print_tensor %c, %ch5

  %d = tfrt_dht.create_uninitialized_tensor.f16.1 [2 : i64]
  %ch7 = tfrt_dht.fill_tensor_with_constant.f16 %d, %ch6 1.0 : f16
  // CHECK-NEXT: DenseHostTensor dtype = f16, shape = [2], values = [fp16(15360), fp16(15360)]
  %ch8 = tfrt_dht.print_tensor %d, %ch7

  %e = tfrt_dht.create_uninitialized_tensor.bf16.1 [1 : i64]
  %ch9 = tfrt_dht.fill_tensor_with_constant.bf16 %e, %ch8 1.0 : bf16
  // CHECK-NEXT: DenseHostTensor dtype = bf16, shape = [1], values = [bf16(16256)]
  %ch10 = tfrt_dht.print_tensor %e, %ch9

  %f = tfrt_dht.create_uninitialized_tensor.ui8.1 [2 : i64]
  %ch11 = tfrt_dht.set_tensor_with_constant_values.ui8 %f, %ch10 [255 : ui8, 7 : ui8]
  // CHECK-NEXT: DenseHostTensor dtype = u8, shape = [2], values = [255, 7]
  %ch12 = tfrt_dht.print_tensor %f, %ch11

  %g = tfrt_dht.create_uninitialized_tensor.i64.1 [0 : i64]
  // CHECK-NEXT: DenseHostTensor dtype = i64, shape = [0], values = []
  %ch13 = tfrt_dht.print_tensor %g, %ch12

  %h = "tfrt_dht.create_uninitialized_tensor.bool.1"() {shape = [2 : i64]} : () -> !t.tensor
  %ch14 = "tfrt_dht.set_tensor_with_constant_values.bool"(%h, %ch13) {values = [true, false]} : (!t.tensor, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: DenseHostTensor dtype = i1, shape = [2], values = [1, 0]
  %ch15 = tfrt_dht.print_tensor %h, %ch14
  tfrt.return
}

// CHECK-LABEL: --- Running 'equality'
func.func @equality() {
  %ch0 = tfrt.new.chain
  %a = tfrt_dht.create_uninitialized_tensor.i32.2 [2 : i64, 2 : i64]
  %ch1 = tfrt_dht.fill_tensor_with_constant.i32 %a, %ch0 3 : i32
  %b = tfrt_dht.create_uninitialized_tensor.i32.2 [2 : i64, 2 : i64]
  %ch2 = tfrt_dht.fill_tensor_with_constant.i32 %b, %ch1 3 : i32
  %eq, %ch3 = tfrt_dht.tensor_equal.i32 %a, %b, %ch2
  // CHECK-NEXT: int1 = 1
  %ch4 = tfrt.print.i1 %eq, %ch3
  %ch5 = tfrt_dht.fill_tensor_with_constant.i32 %b, %ch4 4 : i32
  %ne, %ch6 = tfrt_dht.tensor_equal.i32 %a, %b, %ch5
  // CHECK-NEXT: int1 = 0
  %ch7 = tfrt.print.i1 %ne, %ch6

  %x = tfrt_dht.create_uninitialized_tensor.f32.1 [2 : i64]
  %ch8 = tfrt_dht.set_tensor_with_constant_values.f32 %x, %ch7 [1.0 : f32, 2.0 : f32]
  %y = tfrt_dht.create_uninitialized_tensor.f32.1 [2 : i64]
  %ch9 = tfrt_dht.set_tensor_with_constant_values.f32 %y, %ch8 [1.0 : f32, 2.0000002 : f32]
  %close, %ch10 = "tfrt_dht.tensor_allclose.f32"(%x, %y, %ch9) : (!t.tensor, !t.tensor, !tfrt.chain) -> (i1, !tfrt.chain)
  // CHECK-NEXT: int1 = 1
  %ch11 = tfrt.print.i1 %close, %ch10
  %shape = tfrt_dht.get_tensor_shape %x
  // CHECK-NEXT: shape = [2]
  %ch12 = ts.print_shape %shape, %ch11
  tfrt.return
}

// CHECK-LABEL: --- Running 'errors'
func.func @errors() {
  %ch0 = tfrt.new.chain
  %a = tfrt_dht.create_uninitialized_tensor.i32.1 [3 : i64]
  // expected-error @+1 {{runtime error: Incorrect number of values for the tensor: 2, but expected 3}}
  %ch1 = tfrt_dht.set_tensor_with_constant_values.i32 %a, %ch0 [1 : i32, 2 : i32]
  // expected-error @+1 {{runtime error: tensor has dtype i32 but the kernel expects f32}}
  %ch2 = tfrt_dht.fill_tensor_with_constant.f32 %a, %ch0 1.0 : f32
  tfrt.return
}
// CHECK-NOT: error
