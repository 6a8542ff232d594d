// RUN: bef_executor_lite %s.bef | FileCheck %s --dump-input=fail
// RUN: env PYTFRT_TFRT_REVISION=de22adc4 tfrt_translate -mlir-to-bef %s -o %t.de22adc4.bef && env PYTFRT_TFRT_REVISION=de22adc4 bef_executor_lite %t.de22adc4.bef | FileCheck %s --check-prefix=OLD

// Reconstruction of TFRT's mlir_tests/bef_executor/lifetimes.mlir: the
// exact construction / move / destruction order of `vt.value`s, which depends on stream analysis
// (module `tfrt.cost_threshold = 1`), the LIFO inline queue, stream-sorted tasks and values dying
// right after their last user (docs/executor.md).

module attributes {tfrt.cost_threshold = 1 : i64} {

// CHECK-LABEL: --- Running 'test_linear'
// OLD-LABEL: --- Running 'test_linear'
func.func @test_linear() {
  %ch0 = tfrt.new.chain

  %a = "vt.constant"() {value = 1 : i32} : () -> !vt.value
  %b = "vt.constant"() {value = 2 : i32} : () -> !vt.value
  %c = "vt.add"(%a, %b) : (!vt.value, !vt.value) -> !vt.value
  %ch1 = "vt.print"(%c, %ch0) : (!vt.value, !tfrt.chain) -> (!tfrt.chain)

  %d = "vt.constant"() {value = 4 : i32} : () -> !vt.value
  %e = "vt.constant"() {value = 5 : i32} : () -> !vt.value

  // The return is in the root stream even without operands (TFRT's main branch): the root
  // joins its one-op stream, so every kernel without operands runs as a task, in stream
  // order (constant 5, constant 4, constant 1, then constant 2 and new.chain); add and print
  // follow constant 2 inline.
  // CHECK-NEXT: constructed vt.value(5)
  // CHECK-NEXT: move constructed vt.value(5)
  // CHECK-NEXT: destroyed vt.value(5)
  // CHECK-NEXT: constructed vt.value(4)
  // CHECK-NEXT: move constructed vt.value(4)
  // CHECK-NEXT: destroyed vt.value(4)
  // CHECK-NEXT: constructed vt.value(1)
  // CHECK-NEXT: move constructed vt.value(1)
  // CHECK-NEXT: constructed vt.value(2)
  // CHECK-NEXT: move constructed vt.value(2)
  // CHECK-NEXT: constructed vt.value(3)
  // CHECK-NEXT: move constructed vt.value(3)
  // CHECK-NEXT: destroyed vt.value(1)
  // CHECK-NEXT: destroyed vt.value(2)
  // CHECK-NEXT: print vt_value(3)
  // CHECK-NEXT: destroyed vt.value(3)
  // At TFRT de22adc4 a return without operands was on no data path, so the root stream was
  // the costliest child stream: constant 1, add and print.  Constant 1 runs inline; the other
  // streams run as tasks in stream order (constant 5, constant 4, constant 2, new.chain).
  // OLD-NEXT: constructed vt.value(1)
  // OLD-NEXT: move constructed vt.value(1)
  // OLD-NEXT: constructed vt.value(5)
  // OLD-NEXT: move constructed vt.value(5)
  // OLD-NEXT: destroyed vt.value(5)
  // OLD-NEXT: constructed vt.value(4)
  // OLD-NEXT: move constructed vt.value(4)
  // OLD-NEXT: destroyed vt.value(4)
  // OLD-NEXT: constructed vt.value(2)
  // OLD-NEXT: move constructed vt.value(2)
  // OLD-NEXT: constructed vt.value(3)
  // OLD-NEXT: move constructed vt.value(3)
  // OLD-NEXT: destroyed vt.value(1)
  // OLD-NEXT: destroyed vt.value(2)
  // OLD-NEXT: print vt_value(3)
  // OLD-NEXT: destroyed vt.value(3)
  tfrt.return
}

// CHECK-LABEL: --- Not running 'print_and_return' because it has arguments
func.func @print_and_return(%v: !vt.value, %ch0: !tfrt.chain) -> (!vt.value, !tfrt.chain) {
  %ch1 = "vt.print"(%v, %ch0) : (!vt.value, !tfrt.chain) -> (!tfrt.chain)
  tfrt.return %v, %ch1 : !vt.value, !tfrt.chain
}

// CHECK-LABEL: --- Running 'test_call'
// CHECK-NEXT: constructed vt.value(1)
// CHECK-NEXT: move constructed vt.value(1)
// CHECK-NEXT: print vt_value(1)
// CHECK-NEXT: print vt_value(1)
// CHECK-NEXT: destroyed vt.value(1)
// CHECK-NEXT: 'test_call' returned !tfrt.chain value
func.func @test_call() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = "vt.constant"() {value = 1 : i32} : () -> !vt.value
  %b, %ch1 = tfrt.call @print_and_return(%a, %ch0) : (!vt.value, !tfrt.chain) -> (!vt.value, !tfrt.chain)
  %ch2 = "vt.print"(%b, %ch1) : (!vt.value, !tfrt.chain) -> (!tfrt.chain)
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'test_share_to_two'
// CHECK-NEXT: constructed vt.value(1)
// CHECK-NEXT: move constructed vt.value(1)
// CHECK-NEXT: print vt_value(1)
// CHECK-NEXT: print vt_value(1)
// CHECK-NEXT: destroyed vt.value(1)
// CHECK-NEXT: 'test_share_to_two' returned !tfrt.chain value
func.func @test_share_to_two() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = "vt.constant"() {value = 1 : i32} : () -> !vt.value
  %b, %c = "tfrt_test.share_to_two"(%a) : (!vt.value) -> (!vt.value, !vt.value)
  %ch1 = "vt.print"(%b, %ch0) : (!vt.value, !tfrt.chain) -> (!tfrt.chain)
  %ch2 = "vt.print"(%c, %ch1) : (!vt.value, !tfrt.chain) -> (!tfrt.chain)
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'test_return_value'
// CHECK-NEXT: constructed vt.value(1)
// CHECK-NEXT: move constructed vt.value(1)
// CHECK-NEXT: constructed vt.value(2)
// CHECK-NEXT: move constructed vt.value(2)
// CHECK-NEXT: constructed vt.value(3)
// CHECK-NEXT: move constructed vt.value(3)
// CHECK-NEXT: destroyed vt.value(1)
// CHECK-NEXT: destroyed vt.value(2)
// CHECK-NEXT: 'test_return_value' returned !vt.value value
// CHECK-NEXT: destroyed vt.value(3)
func.func @test_return_value() -> !vt.value {
  %a = "vt.constant"() {value = 1 : i32} : () -> !vt.value
  %b = "vt.constant"() {value = 2 : i32} : () -> !vt.value
  %c = "vt.add"(%a, %b) : (!vt.value, !vt.value) -> !vt.value
  tfrt.return %c : !vt.value
}

// CHECK-LABEL: --- Running 'test_repeat0'
// CHECK-NEXT: constructed vt.value(1)
// CHECK-NEXT: move constructed vt.value(1)
// CHECK-NEXT: print vt_value(1)
// CHECK-NEXT: destroyed vt.value(1)
// CHECK-NEXT: 'test_repeat0' returned !tfrt.chain value
func.func @test_repeat0() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %n = tfrt.constant.i32 0
  %a = "vt.constant"() {value = 1 : i32} : () -> !vt.value
  %b = tfrt.repeat.i32 %n, %a : !vt.value {
    %one = "vt.constant"() {value = 1 : i32} : () -> !vt.value
    %c = "vt.add"(%a, %one) : (!vt.value, !vt.value) -> !vt.value
    tfrt.return %c : !vt.value
  }
  %ch1 = "vt.print"(%b, %ch0) : (!vt.value, !tfrt.chain) -> (!tfrt.chain)
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'test_repeat1'
// CHECK-NEXT: constructed vt.value(1)
// CHECK-NEXT: move constructed vt.value(1)
// CHECK-NEXT: constructed vt.value(1)
// CHECK-NEXT: move constructed vt.value(1)
// CHECK-NEXT: constructed vt.value(2)
// CHECK-NEXT: move constructed vt.value(2)
// CHECK-NEXT: destroyed vt.value(1)
// CHECK-NEXT: destroyed vt.value(1)
// CHECK-NEXT: print vt_value(2)
// CHECK-NEXT: destroyed vt.value(2)
// CHECK-NEXT: 'test_repeat1' returned !tfrt.chain value
func.func @test_repeat1() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %n = tfrt.constant.i32 1
  %a = "vt.constant"() {value = 1 : i32} : () -> !vt.value
  %b = tfrt.repeat.i32 %n, %a : !vt.value {
    %one = "vt.constant"() {value = 1 : i32} : () -> !vt.value
    %c = "vt.add"(%a, %one) : (!vt.value, !vt.value) -> !vt.value
    tfrt.return %c : !vt.value
  }
  %ch1 = "vt.print"(%b, %ch0) : (!vt.value, !tfrt.chain) -> (!tfrt.chain)
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'test_repeat2'
// CHECK-NEXT: constructed vt.value(1)
// CHECK-NEXT: move constructed vt.value(1)
// CHECK-NEXT: constructed vt.value(1)
// CHECK-NEXT: move constructed vt.value(1)
// CHECK-NEXT: constructed vt.value(2)
// CHECK-NEXT: move constructed vt.value(2)
// CHECK-NEXT: destroyed vt.value(1)
// CHECK-NEXT: constructed vt.value(1)
// CHECK-NEXT: move constructed vt.value(1)
// CHECK-NEXT: constructed vt.value(3)
// CHECK-NEXT: move constructed vt.value(3)
// CHECK-NEXT: destroyed vt.value(1)
// CHECK-NEXT: destroyed vt.value(2)
// CHECK-NEXT: destroyed vt.value(1)
// CHECK-NEXT: print vt_value(3)
// CHECK-NEXT: destroyed vt.value(3)
// CHECK-NEXT: 'test_repeat2' returned !tfrt.chain value
func.func @test_repeat2() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %n = tfrt.constant.i32 2
  %a = "vt.constant"() {value = 1 : i32} : () -> !vt.value
  %b = tfrt.repeat.i32 %n, %a : !vt.value {
    %one = "vt.constant"() {value = 1 : i32} : () -> !vt.value
    %c = "vt.add"(%a, %one) : (!vt.value, !vt.value) -> !vt.value
    tfrt.return %c : !vt.value
  }
  %ch1 = "vt.print"(%b, %ch0) : (!vt.value, !tfrt.chain) -> (!tfrt.chain)
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'test_print_hello_unused'
// CHECK-NEXT: hello host executor!
// CHECK-NEXT: constructed vt.value(7)
// CHECK-NEXT: move constructed vt.value(7)
// CHECK-NEXT: destroyed vt.value(7)
func.func @test_print_hello_unused() {
  %ch0 = tfrt.new.chain
  %a = "vt.constant"() {value = 7 : i32} : () -> !vt.value
  %ch1 = "tfrt_test.print_hello"(%ch0) : (!tfrt.chain) -> !tfrt.chain
  tfrt.return
}

}
