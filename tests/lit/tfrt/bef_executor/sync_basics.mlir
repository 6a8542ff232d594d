// RUN: bef_executor_lite %s.bef 2>&1 | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_executor/sync_basics.mlir: sync
// functions, fibonacci, sync errors (returned, never emitted: the expected-error annotations below
// are never verified because no diagnostic points into this file), remaining/repeated arguments,
// many attributes, invoke_sync_function from async code.

// CHECK-LABEL: --- Running 'print_constant'
func.func @print_constant() -> i32 attributes {tfrt.sync} {
  %x = "tfrt.constant_s.i32"() {value = 42 : i32} : () -> i32
  // CHECK-NEXT: 'print_constant' returned 42
  tfrt.return %x : i32
}

// CHECK-LABEL: --- Not running 'add_one' because it has arguments
func.func @add_one(%x: i32) -> i32 attributes {tfrt.sync} {
  %one = "tfrt.constant_s.i32"() {value = 1 : i32} : () -> i32
  %y = "tfrt.add_s.i32"(%x, %one) : (i32, i32) -> i32
  tfrt.return %y : i32
}

// CHECK-LABEL: --- Running 'fibonacci'
func.func @fibonacci() -> i32 attributes {tfrt.sync} {
  %0 = "tfrt.constant_s.i32"() {value = 0 : i32} : () -> i32
  %1 = "tfrt.constant_s.i32"() {value = 1 : i32} : () -> i32
  %2 = "tfrt.add_s.i32"(%0, %1) : (i32, i32) -> i32
  %3 = "tfrt.add_s.i32"(%1, %2) : (i32, i32) -> i32
  %4 = "tfrt.add_s.i32"(%2, %3) : (i32, i32) -> i32
  %5 = "tfrt.add_s.i32"(%3, %4) : (i32, i32) -> i32
  %6 = "tfrt.add_s.i32"(%4, %5) : (i32, i32) -> i32
  %7 = "tfrt.add_s.i32"(%5, %6) : (i32, i32) -> i32
  %8 = "tfrt.add_s.i32"(%6, %7) : (i32, i32) -> i32
  %9 = "tfrt.add_s.i32"(%7, %8) : (i32, i32) -> i32
  %10 = "tfrt.mul_s.i32"(%9, %1) : (i32, i32) -> i32
  // CHECK-NEXT: 'fibonacci' returned 34
  tfrt.return %10 : i32
}

// CHECK-LABEL: --- Running 'sync_fail'
func.func @sync_fail() -> i32 attributes {tfrt.sync} {
  // expected-error @+1 {{something bad happened}}
  %x = "tfrt_test.fail_s"() : () -> i32
  // CHECK-NEXT: 'sync_fail' returned <<error: something bad happened>>
  tfrt.return %x : i32
}

// CHECK-LABEL: --- Running 'sync_error'
func.func @sync_error() -> i32 attributes {tfrt.sync} {
  // expected-error @+1 {{something bad happened}}
  %x = "tfrt_test.error_s"() : () -> i32
  // CHECK-NEXT: 'sync_error' returned <<error: something bad happened>>
  tfrt.return %x : i32
}

// CHECK-LABEL: --- Running 'remaining_args'
func.func @remaining_args() -> i32 attributes {tfrt.sync} {
  %a = "tfrt.constant_s.i32"() {value = 1 : i32} : () -> i32
  %b = "tfrt.constant_s.i32"() {value = 2 : i32} : () -> i32
  %c = "tfrt.constant_s.i32"() {value = 3 : i32} : () -> i32
  %d = "tfrt.constant_s.i32"() {value = 4 : i32} : () -> i32
  %x = "tfrt_test.sync_sum"(%a, %b, %c, %d) : (i32, i32, i32, i32) -> i32
  // CHECK-NEXT: 'remaining_args' returned 10
  tfrt.return %x : i32
}

// CHECK-LABEL: --- Running 'repeated_args'
func.func @repeated_args() -> i32 attributes {tfrt.sync} {
  %a = "tfrt.constant_s.i32"() {value = 1 : i32} : () -> i32
  %b = "tfrt.constant_s.i32"() {value = 2 : i32} : () -> i32
  %x = "tfrt_test.sync_sum2"(%a, %a, %b, %b) : (i32, i32, i32, i32) -> i32
  // CHECK-NEXT: 'repeated_args' returned 6
  tfrt.return %x : i32
}

// CHECK-LABEL: --- Running 'many_attributes'
func.func @many_attributes() -> i32 attributes {tfrt.sync} {
  %x = "tfrt_test.sync_sum_attributes"() {a = 1 : i32, b = 2 : i32, c = 3 : i32, d = 4 : i32, e = 5 : i32} : () -> i32
  // CHECK-NEXT: 'many_attributes' returned 15
  tfrt.return %x : i32
}

// CHECK-LABEL: --- Not running 'sync_add' because it has arguments
func.func @sync_add(%a: i32, %b: i32) -> i32 attributes {tfrt.sync} {
  %c = "tfrt.add_s.i32"(%a, %b) : (i32, i32) -> i32
  tfrt.return %c : i32
}

// CHECK-LABEL: --- Not running 'sync_add_mul' because it has arguments
func.func @sync_add_mul(%a: i32, %b: i32) -> (i32, i32) attributes {tfrt.sync} {
  %c = "tfrt.add_s.i32"(%a, %b) : (i32, i32) -> i32
  %d = "tfrt.mul_s.i32"(%a, %b) : (i32, i32) -> i32
  tfrt.return %c, %d : i32, i32
}

// CHECK-LABEL: --- Running 'invoke_sync_function'
func.func @invoke_sync_function() -> (i32, i32, i32) {
  %a = tfrt.constant.i32 3
  %b = tfrt.constant.i32 4
  %c = "tfrt_test.invoke_sync_function.i32_i32.i32"(%a, %b) {fn = @sync_add} : (i32, i32) -> i32
  %d, %e = "tfrt_test.invoke_sync_function.i32_i32.i32_i32"(%a, %b) {fn = @sync_add_mul} : (i32, i32) -> (i32, i32)
  // CHECK-NEXT: 'invoke_sync_function' returned 7,7,12
  tfrt.return %c, %d, %e : i32, i32, i32
}
