// RUN: bef_executor_lite %s.bef --test_init_function __init__ --functions print_hello,print_bye 2>&1 | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_executor/init.mlir: the init function
// runs first, then the listed functions in the given order.

// CHECK: --- Running '__init__':
// CHECK-NEXT: string = initializing
// CHECK-NEXT: --- Running 'print_hello':
// CHECK-NEXT: hello host executor!
// CHECK-NEXT: --- Running 'print_bye':
// CHECK-NEXT: string = bye

func.func @print_hello() {
  %ch0 = tfrt.new.chain
  %ch1 = "tfrt_test.print_hello"(%ch0) : (!tfrt.chain) -> !tfrt.chain
  tfrt.return
}

func.func @__init__() {
  %ch0 = tfrt.new.chain
  %s = "tfrt_test.get_string"() { value = "initializing" } : () -> !tfrt.string
  %ch1 = "tfrt_test.print_string"(%s, %ch0) : (!tfrt.string, !tfrt.chain) -> !tfrt.chain
  tfrt.return
}

func.func @print_bye() {
  %ch0 = tfrt.new.chain
  %s = "tfrt_test.get_string"() { value = "bye" } : () -> !tfrt.string
  %ch1 = "tfrt_test.print_string"(%s, %ch0) : (!tfrt.string, !tfrt.chain) -> !tfrt.chain
  tfrt.return
}
