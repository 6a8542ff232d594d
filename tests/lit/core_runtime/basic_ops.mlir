// RUN: bef_executor --test_init_function=register_op_handlers_cpu %s.bef | FileCheck %s

func.func @register_op_handlers_cpu() {
  %null = "corert.create_null_op_handler"() : () -> !corert.ophandler
  %cpu = "corert.create_cpu_op_handler"(%null) : (!corert.ophandler) -> !corert.ophandler
  corert.register_op_handler %cpu "cpu"
  tfrt.return
}

// CHECK-LABEL: --- Running 'basic_matmul_f32'
func.func @basic_matmul_f32() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %cpu = corert.get_op_handler %ch0 "cpu"
  %a = corert.executeop(%cpu) "tfrt_test.create_dense_tensor"()
    { shape = [1, 65536], values = [1.0 : f32] } : 1
  %b = corert.executeop(%cpu) "tfrt_test.create_dense_tensor"()
    { shape = [65536, 1], values = [1.0 : f32] } : 1
  %r = corert.executeop(%cpu) "tfrt_test.matmul"(%a, %b)
    {transpose_a = false, transpose_b = false} : 1
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [1, 1], values = [6.553600e+04]
  %ch1 = "corert.print_tensorhandle"(%r, %ch0) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'add_relu_i32'
func.func @add_relu_i32() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %cpu = corert.get_op_handler %ch0 "cpu"
  %a = corert.executeop(%cpu) "tfrt_test.create_dense_tensor"()
    { shape = [2, 2], values = [1 : i32, -2 : i32, 3 : i32, -4 : i32] } : 1
  %b = corert.executeop(%cpu) "tfrt_test.add"(%a, %a) : 1
  %c = corert.executeop(%cpu) "tfrt_test.relu"(%b) : 1
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [2, 2], values = [2, 0, 6, 0]
  %ch1 = "corert.print_tensorhandle"(%c, %ch0) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  %e = corert.executeop(%cpu) "tfrt_test.equal"(%a, %c) : 1
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [2, 2], values = [0, 0, 0, 0]
  %ch2 = "corert.print_tensorhandle"(%e, %ch1) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'argmax_reduce_mean'
func.func @argmax_reduce_mean() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %cpu = corert.get_op_handler %ch0 "cpu"
  %a = corert.executeop(%cpu) "tfrt_test.create_dense_tensor"()
    { shape = [2, 3], values = [1.0 : f32, 5.0 : f32, 2.0 : f32, 7.0 : f32, 0.0 : f32, 3.0 : f32] } : 1
  %m = corert.executeop(%cpu) "tfrt_test.argmax"(%a) { axis = 1 : i32 } : 1
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [2], values = [1, 0]
  %ch1 = "corert.print_tensorhandle"(%m, %ch0) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  %r = corert.executeop(%cpu) "tfrt_test.reduce_mean"(%a) { axis = 0 : i32 } : 1
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [3], values = [4.000000e+00, 2.500000e+00, 2.500000e+00]
  %ch2 = "corert.print_tensorhandle"(%r, %ch1) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'shape_error'
func.func @shape_error() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %cpu = corert.get_op_handler %ch0 "cpu"
  %a = corert.executeop(%cpu) "tfrt_test.create_dense_tensor"()
    { shape = [1, 2], values = [1.0 : f32] } : 1
  // expected-error @+1 {{runtime error: matmul arguments have incompatible shapes}}
  %r = corert.executeop(%cpu) "tfrt_test.matmul"(%a, %a) : 1
  // CHECK-NOT: DenseHostTensor
  %ch1 = "corert.print_tensorhandle"(%r, %ch0) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'unsupported_op'
func.func @unsupported_op() {
  %ch0 = tfrt.new.chain
  %cpu = corert.get_op_handler %ch0 "cpu"
  // expected-error @+1 {{runtime error: unknown op 'tf.invalidop': no op handler implements it (tf.invalidop was not supported by NullOpHandler)}}
  %r = corert.executeop(%cpu) "tf.invalidop"() : 1
  tfrt.return
}

// CHECK-LABEL: --- Running 'error_tensor'
func.func @error_tensor() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %cpu = corert.get_op_handler %ch0 "cpu"
  %a = corert.executeop(%cpu) "tfrt_test.create_dense_tensor"()
    { shape = [1], values = [1 : i32] } : 1
  // expected-error @+1 {{runtime error: error from test.error.tensor implementation}}
  %e = corert.executeop(%cpu) "tfrt_test.error.tensor"(%a) : 1
  // The error propagates silently through the next op and the print.
  %r = corert.executeop(%cpu) "tfrt_test.relu"(%e) : 1
  %ch1 = "corert.print_tensorhandle"(%r, %ch0) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1 : !tfrt.chain
}
// CHECK-NEXT: 'error_tensor' returned <<error: error from test.error.tensor implementation>>

// CHECK-LABEL: --- Running 'error_tensorhandle_print'
func.func @error_tensorhandle_print() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  // expected-error @+1 {{invalid tensorhandle}}
  %h = "tfrt_test.error_tensorhandle"() : () -> !corert.tensorhandle
  // CHECK-NEXT: Error TensorHandle: 'invalid tensorhandle'
  %ch1 = "corert.print_tensorhandle"(%h, %ch0) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'async_ops'
func.func @async_ops() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %cpu = corert.get_op_handler %ch0 "cpu"
  %a = corert.executeop(%cpu) "tfrt_test.create_dense_tensor"()
    { shape = [3], values = [1 : i32, 2 : i32, 3 : i32] } : 1
  %b = corert.executeop(%cpu) "tfrt_test.async.noop"(%a) : 1
  %c = corert.executeop(%cpu) "tfrt_test.async.noop_no_md"(%b) : 1
  %d = corert.executeop(%cpu) "tfrt_test.add"(%c, %a) : 1
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [3], values = [2, 4, 6]
  %ch1 = "corert.print_tensorhandle"(%d, %ch0) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'side_effects_in_order'
func.func @side_effects_in_order() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %cpu = corert.get_op_handler %ch0 "cpu"
  %a = corert.executeop(%cpu) "tfrt_test.create_dense_tensor"() { shape = [1], values = [1 : i32] } : 1
  %b = corert.executeop(%cpu) "tfrt_test.create_dense_tensor"() { shape = [1], values = [2 : i32] } : 1
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [1], values = [1]
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [1], values = [2]
  %ch1 = corert.executeop.seq(%cpu, %ch0) "tfrt_test.print"(%a) : 0
  %ch2 = corert.executeop.seq(%cpu, %ch1) "tfrt_test.print"(%b) : 0
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'tensorhandle_conversions'
func.func @tensorhandle_conversions() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %cpu = corert.get_op_handler %ch0 "cpu"
  %a = corert.executeop(%cpu) "tfrt_test.create_dense_tensor"() { shape = [1, 3], values = [7 : i32] } : 1
  %s = "corert.tensorhandle_to_shape"(%a, %ch0) : (!corert.tensorhandle, !tfrt.chain) -> !ts.shape
  // CHECK-NEXT: shape = [1, 3]
  %ch1 = ts.print_shape %s, %ch0
  %t = "corert.tensorhandle_to_ht"(%a, %ch1) : (!corert.tensorhandle, !tfrt.chain) -> !t.tensor
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [1, 3], values = [7, 7, 7]
  %ch2 = tfrt_dht.print_tensor %t, %ch1
  %one = corert.executeop(%cpu) "tfrt_test.create_dense_tensor"() { shape = [], values = [5 : i32] } : 1
  %i = corert.tensorhandle_to_int32 %one
  // CHECK-NEXT: int32 = 5
  %ch3 = tfrt.print.i32 %i, %ch2
  tfrt.return %ch3 : !tfrt.chain
}
