// RUN: bef_executor %s.bef | FileCheck %s

// COO tensors (docs/conformance.md): conversion with TFRT's quirky index rows, printing (extra empty
// line), round trip and equality.

// CHECK-LABEL: --- Running 'basic_tensor'
func.func @basic_tensor() {
  %c0 = tfrt.new.chain
  %a = tfrt_dht.create_uninitialized_tensor.i32.2 [3 : i64, 2 : i64]
  %c1 = tfrt_dht.fill_tensor_with_constant.i32 %a, %c0 4 : i32
  %s1, %c2 = coo.convert_dht_to_coo.i32.2 %a, %c1
  // CHECK-NEXT: CooHostTensor dtype = i32, shape = [3, 2], indices = [0, 0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 2], values = [4, 4, 4, 4, 4, 4]
  // CHECK-EMPTY:
  %c3 = tfrt_dht.print_tensor %s1, %c2
  %z = tfrt_dht.create_uninitialized_tensor.i32.2 [2 : i64, 3 : i64]
  %c4 = tfrt_dht.fill_tensor_with_constant.i32 %z, %c3 0 : i32
  %s2, %c5 = coo.convert_dht_to_coo.i32.2 %z, %c4
  // CHECK-NEXT: CooHostTensor dtype = i32, shape = [2, 3], indices = [], values = []
  %c6 = tfrt_dht.print_tensor %s2, %c5
  tfrt.return
}

// CHECK-LABEL: --- Running 'round_trip'
func.func @round_trip() {
  %c0 = tfrt.new.chain
  %a = tfrt_dht.create_uninitialized_tensor.i32.2 [3 : i64, 3 : i64]
  %c1 = tfrt_dht.set_tensor_with_constant_values.i32 %a, %c0 [0 : i32, 1 : i32, 0 : i32, 2 : i32, 0 : i32, 3 : i32, 0 : i32, 0 : i32, 4 : i32]
  %s, %c2 = coo.convert_dht_to_coo.i32.2 %a, %c1
  %d, %c3 = coo.convert_coo_to_dht.i32.2 %s, %c2
  %f, %c4 = coo.convert_dht_to_coo.i32.2 %d, %c3
  %cmp, %c5 = tfrt_dht.tensor_equal.i32 %a, %d, %c4
  // CHECK-NEXT: int1 = 1
  %c6 = tfrt.print.i1 %cmp, %c5
  %cmp2, %c7 = coo.tensor_equal.i32.2 %s, %f, %c6
  // CHECK-NEXT: int1 = 1
  %c8 = tfrt.print.i1 %cmp2, %c7
  tfrt.return
}

// CHECK-LABEL: --- Running 'basic_f32_tensor'
func.func @basic_f32_tensor() {
  %c0 = tfrt.new.chain
  %a = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 2 : i64]
  %c1 = tfrt_dht.fill_tensor_with_constant.f32 %a, %c0 1.0 : f32
  %s1, %c2 = coo.convert_dht_to_coo.f32.2 %a, %c1
  // CHECK-NEXT: CooHostTensor dtype = f32, shape = [2, 2], indices = [0, 0, 0, 1, 1, 0, 1, 1], values = [1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00]
  %c3 = tfrt_dht.print_tensor %s1, %c2
  tfrt.return
}
