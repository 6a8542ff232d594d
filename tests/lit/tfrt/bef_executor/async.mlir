// RUN: bef_executor_lite -work_queue_type=s %s.bef | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_executor/async.mlir: async
// kernels, repeat over async values, calls returning async values, async copies, as_chain. With
// the single-threaded queue the enqueued tasks only run when the driver awaits (docs/host.md, docs/executor.md).

// CHECK-LABEL: --- Running 'async_add'
func.func @async_add() {
  %ch0 = tfrt.new.chain
  %x = tfrt.constant.i32 42
  %c1 = tfrt.constant.i32 1

  %y = "tfrt_test.async_add.i32"(%x, %c1) : (i32, i32) -> i32
  %z = "tfrt_test.async_add.i32"(%y, %c1) : (i32, i32) -> i32

  %ch1 = tfrt.print.i32 %y, %ch0
  %ch2 = tfrt.print.i32 %z, %ch1

  // CHECK-NEXT: int32 = 43
  // CHECK-NEXT: int32 = 44
  tfrt.return
}

// The repeat body is an anonymous region function with arguments.
// CHECK-LABEL: --- Not running '' because it has arguments
// CHECK-LABEL: --- Running 'async_repeat2'
func.func @async_repeat2() {
  %count = tfrt.constant.i32 2
  %ch0 = tfrt.new.chain
  %v0 = tfrt.constant.i32 42

  %ch3, %v3 = tfrt.repeat.i32 %count, %ch0, %v0 : !tfrt.chain, i32 {
    %one = tfrt.constant.i32 1
    %v2 = "tfrt_test.async_add.i32"(%v0, %one) : (i32, i32) -> i32
    %ch2 = tfrt.print.i32 %v2, %ch0
    tfrt.return %ch2, %v2 : !tfrt.chain, i32
  }

  // CHECK-NEXT: int32 = 43
  // CHECK-NEXT: int32 = 44
  // CHECK-NEXT: int32 = 44
  %ch4 = tfrt.print.i32 %v3, %ch3
  tfrt.return
}

// CHECK-LABEL: --- Running 'async_repeat_in_call'
func.func @async_repeat_in_call() -> i32 {
  %count = tfrt.constant.i32 5
  %v0 = tfrt.constant.i32 0
  %v = tfrt.call @repeat_async_add(%count, %v0) : (i32, i32) -> i32
  // CHECK-NEXT: 'async_repeat_in_call' returned 5
  tfrt.return %v : i32
}

// CHECK-LABEL: --- Not running 'repeat_async_add' because it has arguments
func.func @repeat_async_add(%n: i32, %v0: i32) -> i32 {
  %v = tfrt.repeat.i32 %n, %v0 : i32 {
    %one = tfrt.constant.i32 1
    %v1 = "tfrt_test.async_add.i32"(%v0, %one) : (i32, i32) -> i32
    tfrt.return %v1 : i32
  }
  tfrt.return %v : i32
}

// CHECK-LABEL: --- Running 'test_async_print_result'
func.func @test_async_print_result() -> i32 {
  %c1 = tfrt.constant.i32 1
  %c42 = tfrt.constant.i32 42
  %a = "tfrt_test.async_add.i32"(%c1, %c42) : (i32, i32) -> i32
  %ch0 = tfrt.new.chain
  %ch1 = tfrt.print.i32 %a, %ch0
  // CHECK-NEXT: int32 = 43
  // CHECK-NEXT: 'test_async_print_result' returned 43
  tfrt.return %a : i32
}

// CHECK-LABEL: --- Not running 'call_async_add.i32' because it has arguments
func.func @call_async_add.i32(%x: i32, %y: i32) -> i32 {
  %a = "tfrt_test.async_add.i32"(%x, %y) : (i32, i32) -> i32
  %b = "tfrt_test.async_add.i32"(%a, %y) : (i32, i32) -> i32
  tfrt.return %b : i32
}

// CHECK-LABEL: --- Running 'async_add_with_call'
func.func @async_add_with_call() {
  %ch0 = tfrt.new.chain
  %x = tfrt.constant.i32 42
  %c1 = tfrt.constant.i32 1
  %y = tfrt.call @call_async_add.i32(%x, %c1) : (i32, i32) -> i32
  %z = tfrt.call @call_async_add.i32(%y, %c1) : (i32, i32) -> i32
  // CHECK-NEXT: int32 = 44
  %ch1 = tfrt.print.i32 %y, %ch0
  // CHECK-NEXT: int32 = 46
  %ch2 = tfrt.print.i32 %z, %ch1
  tfrt.return
}

// CHECK-LABEL: --- Running 'test_async_copy'
func.func @test_async_copy() -> (i32, i32, i32) {
  %x = tfrt.constant.i32 42
  %a = "tfrt_test.async_copy.i32"(%x) : (i32) -> i32
  %b = "tfrt_test.async_copy_2.i32"(%a) : (i32) -> i32
  %c = "tfrt_test.async_copy.with_delay.i32"(%b) : (i32) -> i32
  // CHECK-NEXT: 'test_async_copy' returned 42,42,42
  tfrt.return %a, %b, %c : i32, i32, i32
}

// CHECK-LABEL: --- Running 'test_as_chain'
func.func @test_as_chain() -> !tfrt.chain {
  %x = tfrt.constant.i32 1
  %y = "tfrt_test.async_copy.i32"(%x) : (i32) -> i32
  %ch0 = "tfrt_test.as_chain"(%y) : (i32) -> !tfrt.chain
  // CHECK-NEXT: int32 = 1
  %ch1 = tfrt.print.i32 %y, %ch0
  // CHECK-NEXT: hello host executor!
  %ch2 = "tfrt_test.print_hello"(%ch1) : (!tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: 'test_as_chain' returned !tfrt.chain value
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'test_do_async'
func.func @test_do_async() -> i32 {
  %x = tfrt.constant.i32 40
  %c = tfrt.constant.i32 2
  %y = tfrt_test.do.async %x, %c : (i32, i32) -> (i32) {
    %z = tfrt.add.i32 %x, %c
    tfrt.return %z : i32
  }
  // CHECK: 'test_do_async' returned 42
  tfrt.return %y : i32
}
