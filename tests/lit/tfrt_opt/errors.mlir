// RUN: tfrt_opt -split-input-file -verify-diagnostics %s
// no_bef_translation

func.func @wrong_count() -> i32 {
  // expected-error @+1 {{'tfrt.return' op has 0 operands, but enclosing function returns 1}}
  tfrt.return
}

// -----

func.func @wrong_type(%x: f32) -> i32 {
  // expected-error @+1 {{type of return operand 0 ('f32') doesn't match function result type ('i32')}}
  tfrt.return %x : f32
}

// -----

func.func @cost() {
  %c = tfrt.constant.i32 1
  // expected-error @+1 {{op cost value must be larger than 0}}
  %t = tfrt_test.test_cost %c {id = 0 : i64, _tfrt_cost = 0 : i64} : i32
  tfrt.return
}

// -----

func.func @shape() {
  // expected-error @+1 {{'ts.build_shape' op result #0 must be !ts.shape type}}
  %s = "ts.build_shape"() {value = [1 : i64]} : () -> i32
  tfrt.return
}

// -----

func.func @undefined() {
  // expected-error @+1 {{use of undeclared SSA value name}}
  %y = tfrt.add.i32 %nope, %nope
  tfrt.return
}

// -----

func.func @call() {
  // expected-error @+1 {{'missing_callee' does not reference a valid function}}
  tfrt.call @missing_callee() : () -> ()
  tfrt.return
}

// -----

func.func @mismatch(%x: i32) { // expected-note {{prior use here}}
  // expected-error @+1 {{use of value '%x' expects different type than prior uses: 'f32' vs 'i32'}}
  %y = tfrt.add.f32 %x, %x
  tfrt.return
}

// -----

// A region's tfrt.return must give the enclosing op's result types.
func.func @repeat_mismatch(%n: i32, %x: f32) -> f32 {
  %y = tfrt.repeat.i32 %n, %x : f32 {
    %k = tfrt.constant.i32 1
    // expected-error @+1 {{'tfrt.return' op operand types don't match 'tfrt.repeat.i32' result}}
    tfrt.return %k : i32
  }
  tfrt.return %y : f32
}

// -----

// Verification stops at the first failing op, inner ops first (as MLIR's verifier).
func.func @first_error_only(%c: i1, %v: i32) -> f32 {
  %r = tfrt.if %c, %v : (i32) -> (i32) {
    // expected-error @+1 {{'tfrt.return' op operand types don't match 'tfrt.if' result}}
    tfrt.return
  } else {
    tfrt.return %v : i32
  }
  tfrt.return %r : i32
}
