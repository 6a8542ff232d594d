// RUN: tfrt_opt %s -split-input-file -verify-diagnostics
// no_bef_translation

// Reconstruction of TFRT's mlir_tests/compiler/opt_err.mlir.

func.func @invalid_cost() -> i32 {
  %c0 = tfrt.constant.i32 0
  // expected-error @+1 {{op cost value must be larger than 0}}
  %c1 = tfrt_test.test_cost %c0 {id = 0 : i64, _tfrt_cost = 0 : i64} : i32
  tfrt.return %c1 : i32
}
