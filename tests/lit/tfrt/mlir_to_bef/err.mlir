// Reconstruction of TFRT's mlir_tests/mlir_to_bef/err.mlir: every mlir_to_bef error.
// RUN: tfrt_translate -mlir-to-bef -split-input-file -verify-diagnostics %s
// no_bef_translation

func.func @no_return() {
  // expected-error @+1 {{all functions need to have a tfrt.return}}
  %x = tfrt.new.chain
}

// -----

// expected-error @+1 {{external functions are not allowed}}
func.func @external(i32)

// -----

func.func @missing() {
  // expected-error @+1 {{function @missing_callee not defined}}
  "simple.op"() {fn = @missing_callee} : () -> ()
  tfrt.return
}

// -----

func.func @call() {
  // expected-error @+1 {{'missing_callee' does not reference a valid function}}
  tfrt.call @missing_callee() : () -> ()
  tfrt.return
}

// -----

func.func @sync_arg(%a: i32) -> i32 attributes {tfrt.sync} {
  // expected-error @+1 {{return value 0 is an argument in a sync function}}
  tfrt.return %a : i32
}

// -----

func.func @sync_dup() -> (i32, i32) attributes {tfrt.sync} {
  %a = "tfrt.constant_s.i32"() {value = 1 : i32} : () -> i32
  // expected-error @+1 {{return value 1 is duplicated in a sync function}}
  tfrt.return %a, %a : i32, i32
}

// -----

func.func @capture() {
  %a = tfrt.constant.i32 1
  tfrt.repeat.i32 %a {
    // expected-error @+1 {{BEF executor only supports references to kernels within the current region}}
    %b = tfrt.add.i32 %a, %a
    tfrt.return
  }
  tfrt.return
}

// -----

func.func @not_last() {
  // expected-error @+1 {{return op must be at the end of its block}}
  tfrt.return
  %x = tfrt.new.chain
  tfrt.return
}

// -----

func.func @attr() {
  // expected-error @+1 {{BEF files cannot encode the 'bad' attribute}}
  "simple.op"() {bad = affine_map<(d0) -> (d0)>} : () -> ()
  tfrt.return
}
