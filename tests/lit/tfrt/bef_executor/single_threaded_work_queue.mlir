// RUN: bef_executor_lite --work_queue_type=s %s.bef 2>&1 | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_executor/single_threaded_work_queue.mlir:
// an error input combined with an input that is produced asynchronously on the single-threaded
// queue; the dependent kernel waits for the async value, then is skipped with the error.

// CHECK-LABEL: --- Not running 'call_add' because it has arguments
func.func @call_add(%x: i32, %y: i32) -> i32 {
  %z = tfrt.add.i32 %x, %y
  tfrt.return %z : i32
}

// CHECK-LABEL: --- Running 'error_input_to_call'
func.func @error_input_to_call() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = "tfrt_test.async_constant.i32"() {value = 1 : i32} : () -> i32
  // expected-error @+1 {{runtime error: something bad happened}}
  %b = "tfrt_test.fail"() : () -> i32
  %c = tfrt.call @call_add(%a, %b) : (i32, i32) -> i32
  %ch1 = tfrt.print.i32 %c, %ch0
  // CHECK-NEXT: 'error_input_to_call' returned <<error: something bad happened>>
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'error_input_to_add'
func.func @error_input_to_add() -> (i32, !tfrt.chain) {
  %ch0 = tfrt.new.chain
  %a = "tfrt_test.async_constant.i32"() {value = 1 : i32} : () -> i32
  // expected-error @+1 {{runtime error: something bad happened}}
  %b = "tfrt_test.fail"() : () -> i32
  %c = tfrt.add.i32 %a, %b
  %ch1 = tfrt.print.i32 %a, %ch0
  // CHECK-NEXT: int32 = 1
  // CHECK-NEXT: 'error_input_to_add' returned <<error: something bad happened>>,!tfrt.chain value
  tfrt.return %c, %ch1 : i32, !tfrt.chain
}
