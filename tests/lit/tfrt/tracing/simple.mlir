// RUN: bef_executor_debug_tracing --enable_tracing --tracing_level=debug %s.bef 2>&1 | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/tracing/simple.mlir: the debug tracing sink's
// scopes appear after the normal output.

// CHECK-LABEL: --- Running 'print_test'
// CHECK-NEXT: hello host executor!
// CHECK: Scope:Bef Executor
// CHECK: Scope:Function: print_test
// CHECK: End Scope
func.func @print_test() {
  %ch0 = tfrt.new.chain
  %ch1 = "tfrt_test.print_hello"(%ch0) : (!tfrt.chain) -> !tfrt.chain
  tfrt.return
}
