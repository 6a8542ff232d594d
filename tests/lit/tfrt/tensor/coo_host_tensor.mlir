// RUN: bef_executor %s.bef | FileCheck %s --dump-input=fail
// RUN: tfrt_opt %s | tfrt_opt

// Reconstruction of TFRT's mlir_tests/tensor/coo_host_tensor.mlir: DHT <-> COO
// conversion, printing (with its extra empty line) and equality.

// CHECK-LABEL: --- Running 'basic_coo_tensor'
func.func @basic_coo_tensor() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %t = tfrt_dht.create_uninitialized_tensor.i32.2 [3 : i64, 2 : i64]
  %ch1 = tfrt_dht.set_tensor_with_constant_values.i32 %t, %ch0 [0 : i32, 1 : i32, 0 : i32, 2 : i32, 3 : i32, 0 : i32]
  %s, %ch2 = coo.convert_dht_to_coo.i32.2 %t, %ch1

  // CHECK-NEXT: CooHostTensor dtype = i32, shape = [3, 2], indices = [0, 1, 1, 0, 1, 1], values = [1, 2, 3]
  // CHECK-EMPTY:
  %ch3 = tfrt_dht.print_tensor %s, %ch2
  tfrt.return %ch3 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'coo_f32_tensor'
func.func @coo_f32_tensor() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %t = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 2 : i64]
  %ch1 = tfrt_dht.set_tensor_with_constant_values.f32 %t, %ch0 [0.0 : f32, 1.5 : f32, -2.0 : f32, 0.0 : f32]
  %s, %ch2 = coo.convert_dht_to_coo.f32.2 %t, %ch1

  // CHECK-NEXT: CooHostTensor dtype = f32, shape = [2, 2], indices = [0, 1, 1, 0], values = [1.500000e+00, -2.000000e+00]
  // CHECK-EMPTY:
  %ch3 = tfrt_dht.print_tensor %s, %ch2
  tfrt.return %ch3 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'coo_round_trip'
func.func @coo_round_trip() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %t = tfrt_dht.create_uninitialized_tensor.i32.2 [3 : i64, 3 : i64]
  %ch1 = tfrt_dht.set_tensor_with_constant_values.i32 %t, %ch0 [0 : i32, 7 : i32, 0 : i32, 0 : i32, 0 : i32, 9 : i32, 4 : i32, 0 : i32, 0 : i32]
  %s, %ch2 = coo.convert_dht_to_coo.i32.2 %t, %ch1
  %d, %ch3 = coo.convert_coo_to_dht.i32.2 %s, %ch2

  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [3, 3], values = [0, 7, 0, 0, 0, 9, 4, 0, 0]
  %ch4 = tfrt_dht.print_tensor %d, %ch3
  %eq, %ch5 = tfrt_dht.tensor_equal.i32 %t, %d, %ch4
  // CHECK-NEXT: int1 = 1
  %ch6 = tfrt.print.i1 %eq, %ch5
  tfrt.return %ch6 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'coo_tensor_equal'
func.func @coo_tensor_equal() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = tfrt_dht.create_uninitialized_tensor.i32.2 [2 : i64, 2 : i64]
  %ch1 = tfrt_dht.set_tensor_with_constant_values.i32 %a, %ch0 [1 : i32, 0 : i32, 0 : i32, 2 : i32]
  %b = tfrt_dht.create_uninitialized_tensor.i32.2 [2 : i64, 2 : i64]
  %ch2 = tfrt_dht.set_tensor_with_constant_values.i32 %b, %ch1 [1 : i32, 0 : i32, 0 : i32, 3 : i32]
  %sa, %ch3 = coo.convert_dht_to_coo.i32.2 %a, %ch2
  %sb, %ch4 = coo.convert_dht_to_coo.i32.2 %b, %ch3

  %eq0, %ch5 = coo.tensor_equal.i32.2 %sa, %sa, %ch4
  // CHECK-NEXT: int1 = 1
  %ch6 = tfrt.print.i1 %eq0, %ch5
  %eq1, %ch7 = coo.tensor_equal.i32.2 %sa, %sb, %ch6
  // CHECK-NEXT: int1 = 0
  %ch8 = tfrt.print.i1 %eq1, %ch7
  tfrt.return %ch8 : !tfrt.chain
}
