// RUN: tfrt_translate -mlir-to-bef -split-input-file -verify-diagnostics %s
// RUN: not tfrt_opt %s 2>&1 | FileCheck %s
// no_bef_translation

// A tfrt.call must match its callee's signature (MLIR's func.call wording), at the call.

func.func @callee(%x: i32) -> i32 {
  tfrt.return %x : i32
}

// CHECK: call_types.mlir:[[# @LINE + 4]]:3: error: 'tfrt.call' op operand type mismatch: expected operand type 'i32', but provided 'f32' for operand number 0
func.func @operand_mismatch() {
  %f = tfrt.constant.f32 1.0
  // expected-error @+1 {{'tfrt.call' op operand type mismatch: expected operand type 'i32', but provided 'f32' for operand number 0}}
  %r = tfrt.call @callee(%f) : (f32) -> i32
  tfrt.return
}

// -----

func.func @callee(%x: i32) -> i32 {
  tfrt.return %x : i32
}

func.func @result_mismatch() {
  %i = tfrt.constant.i32 1
  // expected-error @+1 {{'tfrt.call' op result type mismatch: expected result type 'i32', but provided 'i64' for result number 0}}
  %r = tfrt.call @callee(%i) : (i32) -> i64
  tfrt.return
}

// -----

func.func @callee(%x: i32) -> i32 {
  tfrt.return %x : i32
}

func.func @operand_count() {
  %i = tfrt.constant.i32 1
  // expected-error @+1 {{'tfrt.call' op incorrect number of operands for callee}}
  %r = tfrt.call @callee(%i, %i) : (i32, i32) -> i32
  tfrt.return
}

// -----

func.func @callee(%x: i32) -> i32 {
  tfrt.return %x : i32
}

func.func @result_count() {
  %i = tfrt.constant.i32 1
  // expected-error @+1 {{'tfrt.call' op incorrect number of results for callee}}
  tfrt.call @callee(%i) : (i32) -> ()
  tfrt.return
}
