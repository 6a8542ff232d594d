// Core runtime op dispatch scopes (docs/tracing.md): each corert.executeop
// kernel opens `<op>#op_handler=<handler>#`, inside it `RunMetadataFunction` and
// `RunDispatchFunction: <op>#op_name=<op>,[long_name=<named loc>,]Inputs=(<md>;...),
// Results=(<md>),Attributes=<OpAttrs print>#`.  Kernel scopes sit inside the executor's
// `BEFExecutor::ProcessReadyKernels` scope.
// RUN: bef_executor --enable_tracing --tracing_level=debug --test_init_function=register_op_handlers_cpu %s.bef | FileCheck %s --dump-input=fail

// CHECK: Scope:Function: register_op_handlers_cpu
// CHECK-NEXT: Scope:BEFExecutor::ProcessReadyKernels
func.func @register_op_handlers_cpu() {
  // CHECK-NEXT: Scope:corert.create_null_op_handler
  // CHECK-NEXT: End Scope
  %null = "corert.create_null_op_handler"() : () -> !corert.ophandler
  // CHECK-NEXT: Scope:corert.create_cpu_op_handler
  // CHECK-NEXT: End Scope
  %cpu = "corert.create_cpu_op_handler"(%null) : (!corert.ophandler) -> !corert.ophandler
  // CHECK-NEXT: Scope:corert.register_op_handler
  // CHECK-NEXT: End Scope
  corert.register_op_handler %cpu "cpu"
  tfrt.return
}

// CHECK: Scope:Function: basic_test_matmul_f32
func.func @basic_test_matmul_f32() -> !tfrt.chain {
  // CHECK: Scope:tfrt.new.chain
  %ch0 = tfrt.new.chain
  // CHECK: Scope:corert.get_op_handler
  %cpu = corert.get_op_handler %ch0 "cpu"

  // CHECK: Scope:corert.executeop
  // CHECK-NEXT: Scope:tfrt_test.create_dense_tensor#op_handler=cpu#
  // CHECK-NEXT: Scope:RunMetadataFunction
  // CHECK-NEXT: End Scope
  // CHECK-NEXT: Scope:RunDispatchFunction: tfrt_test.create_dense_tensor#op_name=tfrt_test.create_dense_tensor,Inputs=(),Results=(f32 [1, 4]),Attributes=OpAttrs contains 2 entries:
  // CHECK-NEXT: {{^}}  'shape' type=I64 value=[1, 4]
  // CHECK-NEXT: {{^}}  'values' type=F32 value=[1.000000e+00]
  // CHECK-EMPTY:
  // CHECK-NEXT: {{^}}#
  // CHECK-NEXT: End Scope
  // CHECK-NEXT: End Scope
  // CHECK-NEXT: End Scope
  %a = corert.executeop(%cpu)
    "tfrt_test.create_dense_tensor"() { shape = [1, 4], values = [1.0 : f32] } : 1

  // CHECK: Scope:corert.executeop
  // CHECK-NEXT: Scope:tfrt_test.create_dense_tensor#op_handler=cpu#
  %b = corert.executeop(%cpu)
    "tfrt_test.create_dense_tensor"() { shape = [4, 1], values = [1.0 : f32] } : 1

  // CHECK: Scope:corert.executeop
  // CHECK-NEXT: Scope:tfrt_test.matmul#op_handler=cpu#
  // CHECK-NEXT: Scope:RunMetadataFunction
  // CHECK-NEXT: End Scope
  // CHECK-NEXT: Scope:RunDispatchFunction: tfrt_test.matmul#op_name=tfrt_test.matmul,long_name=MyScope/MyMatmul,Inputs=(f32 [1, 4];f32 [4, 1]),Results=(f32 [1, 1]),Attributes=OpAttrs contains 2 entries:
  // CHECK-NEXT: 'transpose_a' type=BOOL value=0
  %r = corert.executeop(%cpu) "tfrt_test.matmul"(%a, %b)
    {transpose_a = false, transpose_b = false} : 1 loc("MyScope/MyMatmul")

  tfrt.return %ch0 : !tfrt.chain
}
