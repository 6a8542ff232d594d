// RUN: tfrt_opt %s -split-input-file --verify-diagnostics
// no_bef_translation

// Reconstruction of TFRT's mlir_tests/tensor/kernel_errors.mlir: the result type
// constraint of ts.build_shape.

func.func @build_shape_bad_result_type() {
  // expected-error @+1 {{'ts.build_shape' op result #0 must be !ts.shape type}}
  %a = "ts.build_shape"() {value = [1 : i64, 57 : i64, 92 : i64]} : () -> i32
  tfrt.return
}
