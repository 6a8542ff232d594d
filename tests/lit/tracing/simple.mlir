// The debug text sink (docs/tracing.md): driver, function, executor loop and kernel scopes.  The
// trace lines are buffered separately and appear after the program's normal output.
// RUN: bef_executor --enable_tracing --tracing_level=debug %s.bef 2>&1 | FileCheck %s --dump-input=fail

// CHECK: --- Running 'print_test'
// CHECK-NEXT: hello host executor!
func.func @print_test() {
// CHECK-NEXT: Scope:Bef Executor
// CHECK-NEXT: Scope:Function: print_test
// CHECK-NEXT: Scope:BEFExecutor::ProcessReadyKernels

  // CHECK-NEXT: Scope:tfrt.new.chain
  %ch0 = tfrt.new.chain
  // CHECK-NEXT: End Scope

  // CHECK-NEXT: Scope:tfrt_test.print_hello
  %ch1 = "tfrt_test.print_hello"(%ch0) : (!tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: End Scope

  tfrt.return

// CHECK-NEXT: End Scope
// CHECK-NEXT: End Scope
// CHECK-NEXT: End Scope
// CHECK-NOT: Scope
}
