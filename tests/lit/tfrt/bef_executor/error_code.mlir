// RUN: bef_executor_lite %s.bef --print_error_code 2>&1 | FileCheck %s --dump-input=fail
// RUN: env PYTFRT_TFRT_REVISION=de22adc4 bef_executor_lite %s.bef --print_error_code 2>&1 | FileCheck %s --check-prefix=OLD

// Modelled on TFRT's mlir_tests/bef_executor/error_code.mlir: a kernel error that names no
// code is INTERNAL, printed by its absl name (TFRT's main branch); at TFRT de22adc4 it was
// Unknown, printed by its ErrorCode enumerator name.

// CHECK-LABEL: --- Running 'test_error_code'
// OLD-LABEL: --- Running 'test_error_code'
func.func @test_error_code() -> i32 {
  // expected-error @+1 {{runtime error: something bad happened}}
  %x = "tfrt_test.fail"() : () -> i32
  // CHECK-NEXT: 'test_error_code' returned <<error: something bad happened, code: INTERNAL>>
  // OLD-NEXT: 'test_error_code' returned <<error: something bad happened, code: Unknown>>
  tfrt.return %x : i32
}
