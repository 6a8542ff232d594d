// Asynchronous test kernels: results produced by tasks of the work queue (docs/conformance.md).
// RUN: bef_executor %s.bef | FileCheck %s
// RUN: bef_executor -work_queue_type=mstd:2 %s.bef | FileCheck %s

// CHECK-LABEL: --- Running 'async_values'
func.func @async_values() -> (i32, i32, i32, i32, i32, i1, i64) {
  %a = tfrt.constant.i32 40
  %b = tfrt.constant.i32 2
  %sum = "tfrt_test.async_add.i32"(%a, %b) : (i32, i32) -> i32
  %c = "tfrt_test.async_constant.i32"() {value = 7 : i32} : () -> i32
  %t = "tfrt_test.async_constant.i1"() {value = 1 : i1} : () -> i1
  %d = "tfrt_test.async_copy.i32"(%sum) : (i32) -> i32
  %e = "tfrt_test.async_copy_2.i32"(%d) : (i32) -> i32
  %f = "tfrt_test.async_copy.with_delay.i32"(%e) : (i32) -> i32
  %g64 = tfrt.constant.i64 64
  %h64 = "tfrt_test.async_copy.with_delay.i64"(%g64) : (i64) -> i64
  // CHECK-NEXT: 'async_values' returned 42,7,42,42,42,1,64
  tfrt.return %sum, %c, %d, %e, %f, %t, %h64 : i32, i32, i32, i32, i32, i1, i64
}

// CHECK-LABEL: --- Running 'sync_delay'
func.func @sync_delay() -> (i32, i64) {
  %a = tfrt.constant.i32 3
  %b = tfrt.constant.i64 4
  %c = "tfrt_test.copy.with_delay.i32"(%a) : (i32) -> i32
  %d = "tfrt_test.copy.with_delay.i64"(%b) : (i64) -> i64
  // CHECK-NEXT: 'sync_delay' returned 3,4
  tfrt.return %c, %d : i32, i64
}

// CHECK-LABEL: --- Running 'as_chain'
func.func @as_chain() -> i32 {
  %a = tfrt.constant.i32 1
  %x = "tfrt_test.async_add.i32"(%a, %a) : (i32, i32) -> i32
  %ch = "tfrt_test.as_chain"(%x) : (i32) -> !tfrt.chain
  // CHECK-NEXT: int32 = 2
  %ch1 = tfrt.print.i32 %x, %ch
  %r = "tfrt_test.identity"(%ch1, %x) : (!tfrt.chain, i32) -> (i32)
  // CHECK-NEXT: 'as_chain' returned 2
  tfrt.return %r : i32
}

// CHECK-LABEL: --- Running 'do_async'
func.func @do_async() -> i32 {
  %x = tfrt.constant.i32 20
  %c = tfrt.constant.i32 22
  %y = tfrt_test.do.async %x, %c : (i32, i32) -> (i32) {
    %z = tfrt.add.i32 %x, %c
    tfrt.return %z : i32
  }
  // CHECK-NEXT: 'do_async' returned 42
  tfrt.return %y : i32
}

// CHECK-LABEL: --- Running 'atomics'
func.func @atomics() -> i32 {
  %ch0 = tfrt.new.chain
  %c = "tfrt_test.atomic.create.i32"() : () -> !test.atomic.i32
  %ch1 = "tfrt_test.atomic.inc.i32"(%c, %ch0) : (!test.atomic.i32, !tfrt.chain) -> !tfrt.chain
  %five = tfrt.constant.i32 5
  %ch2 = "tfrt_test.atomic.add.i32"(%c, %five, %ch1) : (!test.atomic.i32, i32, !tfrt.chain) -> !tfrt.chain
  %v, %ch3 = "tfrt_test.atomic.get.i32"(%c, %ch2) : (!test.atomic.i32, !tfrt.chain) -> (i32, !tfrt.chain)
  // CHECK-NEXT: 'atomics' returned 6
  tfrt.return %v : i32
}

// CHECK-LABEL: --- Running 'blocking_sleep'
func.func @blocking_sleep() -> !tfrt.chain {
  %n = tfrt.constant.i32 1000
  // CHECK-NEXT: Slept for 1000 microseconds
  %ch = "tfrt_test.blocking.usleep"(%n) : (i32) -> (!tfrt.chain)
  // CHECK-NEXT: 'blocking_sleep' returned !tfrt.chain value
  tfrt.return %ch : !tfrt.chain
}

// CHECK-LABEL: --- Running 'fire_and_forget_sleep'
func.func @fire_and_forget_sleep() {
  %n = tfrt.constant.i32 500
  // The driver quiesces after the function, so the print happens before the next function.
  // CHECK-NEXT: Slept for 500 microseconds
  "tfrt_test.usleep"(%n) : (i32) -> ()
  tfrt.return
}

// CHECK-LABEL: --- Running 'sum'
func.func @sum() -> i32 {
  %a = tfrt.constant.i32 1
  %b = "tfrt_test.async_add.i32"(%a, %a) : (i32, i32) -> i32
  %c = "tfrt_test.async_add.i32"(%b, %a) : (i32, i32) -> i32
  %s = "tfrt_test.sum"(%a, %b, %c) : (i32, i32, i32) -> i32
  // CHECK-NEXT: 'sum' returned 6
  tfrt.return %s : i32
}
