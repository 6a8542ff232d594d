// RUN: bef_executor --test_init_function=register_op_handlers_cpu %s.bef | FileCheck %s

func.func @register_op_handlers_cpu() {
  %null = "corert.create_null_op_handler"() : () -> !corert.ophandler
  %cpu = "corert.create_cpu_op_handler"(%null) : (!corert.ophandler) -> !corert.ophandler
  corert.register_op_handler %cpu "cpu"
  tfrt.return
}

// CHECK-LABEL: --- Running 'cast_relu_f16'
func.func @cast_relu_f16() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %cpu = corert.get_op_handler %ch0 "cpu"
  %a = corert.executeop(%cpu) "tfrt_test.create_dense_tensor"()
    { shape = [2], values = [-1.0 : f32, 2.0 : f32] } : 1
  %h = corert.executeop(%cpu) "tfrt_test.cast"(%a) { type = "f16" } : 1
  // CHECK-NEXT: DenseHostTensor dtype = f16, shape = [2], values = [fp16(48128), fp16(16384)]
  %ch1 = "corert.print_tensorhandle"(%h, %ch0) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  %r = corert.executeop(%cpu) "tfrt_test.relu"(%h) : 1
  %f = corert.executeop(%cpu) "tfrt_test.cast"(%r) { type = "f32" } : 1
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [2], values = [0.000000e+00, 2.000000e+00]
  %ch2 = "corert.print_tensorhandle"(%f, %ch1) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch2 : !tfrt.chain
}
