// RUN: tfrt_opt %s | FileCheck %s
// RUN: tfrt_opt %s | tfrt_opt | FileCheck %s

// CHECK-LABEL: func.func @tensors()
func.func @tensors() {
  %ch0 = tfrt.new.chain
  // CHECK: %1 = tfrt_dht.create_uninitialized_tensor.f32.2 [2, 2]
  %t = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 2 : i64]
  // CHECK-NEXT: %2 = tfrt_dht.fill_tensor_with_constant.f32 %1, %0 1.000000e+00 : f32
  %ch1 = tfrt_dht.fill_tensor_with_constant.f32 %t, %ch0 1.0 : f32
  // CHECK-NEXT: %3 = tfrt_dht.set_tensor_with_constant_values.f32 %1, %2 [1.000000e+00 : f32, 2.000000e+00 : f32]
  %ch2 = tfrt_dht.set_tensor_with_constant_values.f32 %t, %ch1 [1.0 : f32, 2.0 : f32]
  // CHECK-NEXT: %4 = tfrt_dht.print_tensor %1, %3
  %ch3 = tfrt_dht.print_tensor %t, %ch2
  // CHECK-NEXT: %5:2 = tfrt_dht.tensor_equal.f32 %1, %1, %4
  %eq, %ch4 = tfrt_dht.tensor_equal.f32 %t, %t, %ch3
  // CHECK-NEXT: %6 = ts.build_shape [1, 57]
  %s = ts.build_shape [1 : i64, 57 : i64]
  // CHECK-NEXT: %7 = ts.print_shape %6, %5#1
  %ch5 = ts.print_shape %s, %ch4
  // CHECK-NEXT: %8 = ts.get_num_elements %6
  %n = ts.get_num_elements %s
  // CHECK-NEXT: %9 = ts.as_fixed_rank_shape.2 %6
  %f = ts.as_fixed_rank_shape.2 %s
  // CHECK-NEXT: %10 = ts.build_unranked_partial_shape
  %p = ts.build_unranked_partial_shape
  // CHECK-NEXT: %11:2 = coo.convert_dht_to_coo.f32.2 %1, %7
  %coo, %ch6 = coo.convert_dht_to_coo.f32.2 %t, %ch5
  // CHECK-NEXT: %12 = "vt.constant"() {value = 1 : i32} : () -> !vt.value
  %v = "vt.constant"() {value = 1 : i32} : () -> !vt.value
  // CHECK-NEXT: %13 = "tfrt_tutorial.create_coordinate"(%8, %8) : (i64, i64) -> !my.coordinate
  %co = "tfrt_tutorial.create_coordinate"(%n, %n) : (i64, i64) -> !my.coordinate
  tfrt.return
}

// CHECK-LABEL: func.func @corert()
func.func @corert() {
  %ch0 = tfrt.new.chain
  // CHECK: %1 = corert.get_op_handler %0 "cpu"
  %cpu = corert.get_op_handler %ch0 "cpu"
  // CHECK-NEXT: %2 = corert.const_dense_tensor dense<[0, 1, 2]> : tensor<3xi32>
  %a = corert.const_dense_tensor dense<[0, 1, 2]> : tensor<3xi32>
  // CHECK-NEXT: %3 = corert.executeop(%1) "tfrt_test.matmul"(%2, %2) {transpose_a = false} : 1
  %m = corert.executeop(%cpu) "tfrt_test.matmul"(%a, %a) {transpose_a = false} : 1
  // CHECK-NEXT: %4 = corert.executeop.seq(%1, %0) "tfrt_test.print"(%3){{$}}
  %ch1 = corert.executeop.seq(%cpu, %ch0) "tfrt_test.print"(%m) : 0
  // CHECK-NEXT: %5 = corert.create_dense_tensor.i32 {shape = [1], value = [2 : i32]}
  %d = corert.create_dense_tensor.i32 {shape = [1], value = [2 : i32]}
  // CHECK-NEXT: %6 = "corert.test"() {shape = #corert.shape<2x?x3>, t = !corert.string} : () -> i32
  %x = "corert.test"() {shape = #corert.shape<2x?x3>, t = !corert.string} : () -> i32
  tfrt.return
}
