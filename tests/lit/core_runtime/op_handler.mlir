// RUN: bef_executor %s.bef 2>&1 | FileCheck %s

// CHECK-LABEL: --- Running 'register_and_get'
func.func @register_and_get() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %null = "corert.create_null_op_handler"() : () -> !corert.ophandler
  %ch1 = corert.register_op_handler %null "my_null"
  %h = corert.get_op_handler %ch1 "my_null"
  // expected-error @+1 {{runtime error: unknown op 'tfrt_test.relu': no op handler implements it (tfrt_test.relu was not supported by NullOpHandler)}}
  %r = corert.executeop(%h) "tfrt_test.relu"() : 1
  // expected-error @+1 {{runtime error: op_handler not found: missing}}
  %missing = corert.get_op_handler %ch1 "missing"
  tfrt.return %ch1 : !tfrt.chain
}
// CHECK-NEXT: 'register_and_get' returned !tfrt.chain value
