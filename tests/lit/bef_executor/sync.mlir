// Sync functions (docs/executor.md): a straight-line interpreter over plain values; the first error
// stops the function and is returned, never emitted (no expected-error needed).
// RUN: bef_executor %s.bef 2>&1 | FileCheck %s
// RUN: bef_executor --work_queue_type=mstd:2 %s.bef 2>&1 | FileCheck %s

// CHECK-LABEL: --- Running 'sync_arith'
func.func @sync_arith() -> (i32, i32) attributes {tfrt.sync} {
  %a = "tfrt.constant_s.i32"() {value = 6 : i32} : () -> i32
  %b = "tfrt.constant_s.i32"() {value = 7 : i32} : () -> i32
  %p = "tfrt.mul_s.i32"(%a, %b) : (i32, i32) -> i32
  %s = "tfrt.add_s.i32"(%p, %a) : (i32, i32) -> i32
  // CHECK-NEXT: 'sync_arith' returned 42,48
  tfrt.return %p, %s : i32, i32
}

// CHECK-LABEL: --- Running 'sync_error'
func.func @sync_error() -> i32 attributes {tfrt.sync} {
  %a = "tfrt.constant_s.i32"() {value = 1 : i32} : () -> i32
  %e = "tfrt_test.fail_s"(%a) : (i32) -> i32
  %b = "tfrt.add_s.i32"(%e, %a) : (i32, i32) -> i32
  // CHECK-NEXT: 'sync_error' returned <<error: something bad happened>>
  tfrt.return %b : i32
}

func.func @sync_fib(%a: i32, %b: i32) -> (i32, i32) attributes {tfrt.sync} {
  %c = "tfrt.add_s.i32"(%a, %b) : (i32, i32) -> i32
  %d = "tfrt.add_s.i32"(%b, %c) : (i32, i32) -> i32
  tfrt.return %c, %d : i32, i32
}

// An async function calling a sync one.
// CHECK-LABEL: --- Running 'call_sync'
func.func @call_sync() -> (i32, i32) {
  %a = tfrt.constant.i32 2
  %b = tfrt.constant.i32 3
  %c, %d = "tfrt_test.invoke_sync_function.i32_i32.i32_i32"(%a, %b) {fn = @sync_fib} : (i32, i32) -> (i32, i32)
  // CHECK-NEXT: 'call_sync' returned 5,8
  tfrt.return %c, %d : i32, i32
}
