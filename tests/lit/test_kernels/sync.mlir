// Sync test kernels, sync functions called from async code, and sync errors (docs/executor.md, docs/conformance.md).
// RUN: bef_executor %s.bef 2>&1 | FileCheck %s

// CHECK-LABEL: --- Running 'sync_sums'
func.func @sync_sums() -> (i32, i32, i32) attributes {tfrt.sync} {
  %a = "tfrt.constant_s.i32"() {value = 1 : i32} : () -> i32
  %b = "tfrt.constant_s.i32"() {value = 2 : i32} : () -> i32
  %c = "tfrt.constant_s.i32"() {value = 3 : i32} : () -> i32
  %s1 = "tfrt_test.sync_sum"(%a, %b, %c) : (i32, i32, i32) -> i32
  %s2 = "tfrt_test.sync_sum2"(%a, %b, %c, %s1) : (i32, i32, i32, i32) -> i32
  %s3 = "tfrt_test.sync_sum_attributes"() {a = 10 : i32, b = 20 : i32, c = 30 : i32} : () -> i32
  // CHECK-NEXT: 'sync_sums' returned 6,12,60
  tfrt.return %s1, %s2, %s3 : i32, i32, i32
}

// CHECK-LABEL: --- Running 'sync_error'
func.func @sync_error() -> i32 attributes {tfrt.sync} {
  %a = "tfrt_test.fail_s"() : () -> i32
  // Sync errors are returned, never emitted.
  // CHECK-NEXT: 'sync_error' returned <<error: something bad happened>>
  tfrt.return %a : i32
}

// CHECK-LABEL: --- Running 'sync_error_s'
func.func @sync_error_s() -> i32 attributes {tfrt.sync} {
  %a = "tfrt_test.error_s"() : () -> i32
  // CHECK-NEXT: 'sync_error_s' returned <<error: something bad happened>>
  tfrt.return %a : i32
}

// CHECK-LABEL: --- Not running 'sync_add_mul' because it has arguments.
func.func @sync_add_mul(%a: i32, %b: i32) -> (i32, i32) attributes {tfrt.sync} {
  %s = "tfrt.add_s.i32"(%a, %b) : (i32, i32) -> i32
  %p = "tfrt.mul_s.i32"(%a, %b) : (i32, i32) -> i32
  tfrt.return %s, %p : i32, i32
}

// CHECK-LABEL: --- Not running 'sync_add' because it has arguments.
func.func @sync_add(%a: i32, %b: i32) -> i32 attributes {tfrt.sync} {
  %s = "tfrt.add_s.i32"(%a, %b) : (i32, i32) -> i32
  tfrt.return %s : i32
}

// CHECK-LABEL: --- Running 'invoke_sync'
func.func @invoke_sync() -> (i32, i32, i32) {
  %a = tfrt.constant.i32 6
  %b = tfrt.constant.i32 7
  %s = "tfrt_test.invoke_sync_function.i32_i32.i32"(%a, %b) {fn = @sync_add} : (i32, i32) -> i32
  %x, %y = "tfrt_test.invoke_sync_function.i32_i32.i32_i32"(%a, %b) {fn = @sync_add_mul} : (i32, i32) -> (i32, i32)
  // CHECK-NEXT: 'invoke_sync' returned 13,13,42
  tfrt.return %s, %x, %y : i32, i32, i32
}
