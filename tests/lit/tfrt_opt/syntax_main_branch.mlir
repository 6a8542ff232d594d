// RUN: tfrt_opt %s | FileCheck %s
// RUN: tfrt_opt %s | tfrt_opt | FileCheck %s
// RUN: bef_executor %s 2>&1 | FileCheck %s --check-prefix=EXEC

// Spellings of TFRT's main branch: the tensor type `!tfrt_tensor.tensor` (the `t` dialect
// renamed) is `!t.tensor`, and tfrt_test.test_cost takes any operands with their types after
// a colon and has one i32 result; without a type list it is the earlier chain form.  Both
// print back in a form that parses again.

// CHECK-LABEL: func.func @renamed_tensor_type
// CHECK: %[[T:.*]] = tfrt_dht.create_uninitialized_tensor.f32.1 [2]
// CHECK: tfrt_dht.print_tensor %[[T]], %{{.*}}
func.func @renamed_tensor_type() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %t = tfrt_dht.create_uninitialized_tensor.f32.1 [2 : i64]
  %ch1 = tfrt_dht.fill_tensor_with_constant.f32 %t, %ch0 1.0 : f32
  %ch2 = "tfrt_dht.print_tensor"(%t, %ch1) : (!tfrt_tensor.tensor, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch2 : !tfrt.chain
}
// EXEC-LABEL: --- Running 'renamed_tensor_type':
// EXEC-NEXT: DenseHostTensor dtype = f32, shape = [2], values = [1.000000e+00, 1.000000e+00]

// CHECK-LABEL: func.func @test_cost_forms
// CHECK: %[[A:.*]] = tfrt_test.test_cost %{{.*}} {_tfrt_cost = 2, id = 1} : i32
// CHECK-NEXT: %[[B:.*]] = tfrt_test.test_cost %[[A]], %{{.*}} {_tfrt_cost = 3, id = 2} : i32, !tfrt.chain
// CHECK-NEXT: %{{.*}} = tfrt_test.test_cost %{{.*}} {_tfrt_cost = 4, id = 3}{{$}}
// CHECK: tfrt.return %[[B]] : i32
func.func @test_cost_forms() -> i32 {
  %ch0 = tfrt.new.chain
  %c0 = tfrt.constant.i32 0
  %a = tfrt_test.test_cost %c0 {id = 1 : i64, _tfrt_cost = 2 : i64} : i32
  %b = tfrt_test.test_cost %a, %ch0 {id = 2 : i64, _tfrt_cost = 3 : i64} : i32, !tfrt.chain
  %ch1 = tfrt_test.test_cost %ch0 {id = 3 : i64, _tfrt_cost = 4 : i64}
  tfrt.return %b : i32
}
// EXEC-LABEL: --- Running 'test_cost_forms':
// EXEC-DAG: id: 1
// EXEC-DAG: id: 2
// EXEC-DAG: id: 3
// EXEC: 'test_cost_forms' returned 0
