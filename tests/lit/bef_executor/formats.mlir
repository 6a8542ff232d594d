// The driver's result formats (docs/conformance.md): i1 as 0/1, integers in decimal, floats in %e,
// other types as "<type> value", errors as <<error: ...>> (with codes under --print_error_code).
// RUN: bef_executor %s.bef 2>&1 | FileCheck %s
// RUN: bef_executor --print_error_code %s.bef 2>&1 | FileCheck %s --check-prefix=CODE
// RUN: bef_executor -print_error_code=true -work_queue_type mstd:2 %s.bef 2>&1 | FileCheck %s --check-prefix=CODE
// RUN: env PYTFRT_TFRT_REVISION=de22adc4 bef_executor --print_error_code %s.bef 2>&1 | FileCheck %s --check-prefix=OLD

// CHECK: Choosing memory leak check allocator.
// CHECK-NEXT: Choosing single-threaded work queue.

// CHECK-LABEL: --- Running 'scalars'
// CODE-LABEL: --- Running 'scalars'
func.func @scalars() -> (i1, i1, i32, i64, f32, f64, !tfrt.chain) {
  %t = tfrt.constant.i1 1
  %f = tfrt.constant.i1 0
  %a = tfrt.constant.i32 -7
  %b = tfrt.constant.i64 9223372036854775807
  %x = tfrt.constant.f32 0.1
  %y = tfrt.constant.f64 -2.5e10
  %ch = tfrt.new.chain
  // CHECK-NEXT: 'scalars' returned 1,0,-7,9223372036854775807,1.000000e-01,-2.500000e+10,!tfrt.chain value
  // CODE-NEXT: 'scalars' returned 1,0,-7,9223372036854775807,1.000000e-01,-2.500000e+10,!tfrt.chain value
  tfrt.return %t, %f, %a, %b, %x, %y, %ch : i1, i1, i32, i64, f32, f64, !tfrt.chain
}

// CHECK-LABEL: --- Running 'no_results'
// CHECK-NEXT: --- Running 'errors'
func.func @no_results() {
  tfrt.return
}

// CHECK-NEXT: 'errors' returned <<error: something bad happened>>
// CODE-LABEL: --- Running 'errors'
// CODE-NEXT: 'errors' returned <<error: something bad happened, code: INTERNAL>>
// OLD-LABEL: --- Running 'errors'
// OLD-NEXT: 'errors' returned <<error: something bad happened, code: Unknown>>
func.func @errors() -> i32 {
  // expected-error @+1 {{runtime error: something bad happened}}
  %x = "tfrt_test.fail"() : () -> i32
  tfrt.return %x : i32
}

// CHECK-LABEL: --- Running 'cancelled'
// CHECK-NEXT: 'cancelled' returned <<error: Cancelled>>
// CODE-LABEL: --- Running 'cancelled'
// CODE-NEXT: 'cancelled' returned <<error: Cancelled, code: CANCELLED>>
// OLD-LABEL: --- Running 'cancelled'
// OLD-NEXT: 'cancelled' returned <<error: Cancelled, code: Cancelled>>
func.func @cancelled() -> i32 {
  %ch0 = tfrt.new.chain
  %zero, %ch1 = "tfrt_test.cancel"(%ch0) : (!tfrt.chain) -> (i32, !tfrt.chain)
  %one = tfrt.constant.i32 1
  %y = tfrt.add.i32 %zero, %one
  tfrt.return %y : i32
}

// Functions with arguments are listed but not run.
// CHECK-NEXT: --- Not running 'with_args' because it has arguments.
func.func @with_args(%a: i32) -> i32 {
  tfrt.return %a : i32
}
