// RUN: tfrt_translate -mlir-to-bef -split-input-file -verify-diagnostics %s
// RUN: not tfrt_opt %s 2>&1 | FileCheck %s
// no_bef_translation

// A literal that does not fit its type is an error at the literal's own line and column.

// CHECK: literal_errors.mlir:[[# @LINE + 3]]:26: error: Integer value 99999999999 is out of range for type i32
func.func @int_out_of_range() {
  // expected-error @+1 {{Integer value 99999999999 is out of range for type i32}}
  %a = tfrt.constant.i32 99999999999
  %b = tfrt.constant.i32 1
  tfrt.return
}

// -----

func.func @f32_overflow() {
  // expected-error @+1 {{float constant out of range for type 'f32'}}
  %a = tfrt.constant.f32 1.0e39
  %b = tfrt.constant.i32 1
  tfrt.return
}

// -----

func.func @f64_overflow() {
  // expected-error @+1 {{float constant out of range for type 'f64'}}
  %a = tfrt.constant.f64 -1.0e999
  tfrt.return
}

// -----

func.func @f16_overflow() {
  // expected-error @+1 {{float constant out of range for type 'f16'}}
  %a = tfrt.constant.f16 65520.0
  tfrt.return
}

// -----

func.func @hex_too_wide() {
  // expected-error @+1 {{hexadecimal float constant out of range for type 'f32'}}
  %a = tfrt.constant.f32 0x17FC00000
  tfrt.return
}

// -----

func.func @hex_f64_too_wide() {
  // expected-error @+1 {{hexadecimal float constant out of range for type 'f64'}}
  %a = tfrt.constant.f64 0x17FF8000000000000
  tfrt.return
}

// -----

func.func @hex_negative() {
  // expected-error @+1 {{hexadecimal float literal should not have a leading minus}}
  %a = tfrt.constant.f32 -0x3F800000
  tfrt.return
}
