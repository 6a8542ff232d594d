// RUN: tfrt_opt %s -split-input-file --verify-diagnostics
// no_bef_translation

// Reconstruction of TFRT's mlir_tests/basic_kernels/kernel_errors.mlir: verifier and
// parser messages of tfrt.return and tfrt.if.

func.func @return_count_mismatch() -> i32 {
  // expected-error @+1 {{'tfrt.return' op has 0 operands, but enclosing function returns 1}}
  tfrt.return
}

// -----

func.func @return_type_mismatch() -> i32 {
  %x = tfrt.constant.f32 1.0
  // expected-error @+1 {{type of return operand 0 ('f32') doesn't match function result type ('i32')}}
  tfrt.return %x : f32
}

// -----

func.func @if_without_else(%cond: i1, %x: i32) -> i32 {
  %r = tfrt.if %cond, %x : (i32) -> (i32) {
    tfrt.return %x : i32
  }
  // The parser reports the missing else at the token after the then-region.
  // expected-error @+1 {{expected 'else' in 'tfrt.if' with result values}}
  tfrt.return %r : i32
}
