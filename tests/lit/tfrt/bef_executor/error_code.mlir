// RUN: bef_executor_lite %s.bef --print_error_code 2>&1 | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_executor/error_code.mlir.

// CHECK-LABEL: --- Running 'test_error_code'
func.func @test_error_code() -> i32 {
  // expected-error @+1 {{runtime error: something bad happened}}
  %x = "tfrt_test.fail"() : () -> i32
  // CHECK-NEXT: 'test_error_code' returned <<error: something bad happened, code: Unknown>>
  tfrt.return %x : i32
}
