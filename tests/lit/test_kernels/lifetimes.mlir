// vt.value construction, moves and destruction show when values die (docs/executor.md, docs/conformance.md),
// plus the tfrt_tutorial kernels.
// RUN: bef_executor %s.bef | FileCheck %s

// CHECK-LABEL: --- Running 'vt_chain'
func.func @vt_chain() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  // CHECK-NEXT: constructed vt.value(1)
  // CHECK-NEXT: move constructed vt.value(1)
  %v1 = "vt.constant"() {value = 1 : i32} : () -> !vt.value
  %v2 = "vt.add"(%v1, %v1) : (!vt.value, !vt.value) -> !vt.value
  // CHECK-NEXT: constructed vt.value(2)
  // CHECK-NEXT: move constructed vt.value(2)
  // CHECK-NEXT: destroyed vt.value(1)
  // CHECK-NEXT: print vt_value(2)
  // CHECK-NEXT: destroyed vt.value(2)
  %ch1 = "vt.print"(%v2, %ch0) : (!vt.value, !tfrt.chain) -> (!tfrt.chain)
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'vt_unused'
func.func @vt_unused() {
  // A result without users dies right after its kernel.
  // CHECK-NEXT: constructed vt.value(5)
  // CHECK-NEXT: move constructed vt.value(5)
  // CHECK-NEXT: destroyed vt.value(5)
  "vt.constant"() {value = 5 : i32} : () -> !vt.value
  tfrt.return
}

// CHECK-LABEL: --- Running 'share_to_two'
func.func @share_to_two() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  // CHECK-NEXT: constructed vt.value(3)
  // CHECK-NEXT: move constructed vt.value(3)
  %v = "vt.constant"() {value = 3 : i32} : () -> !vt.value
  %a, %b = "tfrt_test.share_to_two"(%v) : (!vt.value) -> (!vt.value, !vt.value)
  // CHECK-NEXT: print vt_value(3)
  %ch1 = "vt.print"(%a, %ch0) : (!vt.value, !tfrt.chain) -> (!tfrt.chain)
  // CHECK-NEXT: print vt_value(3)
  %ch2 = "vt.print"(%b, %ch1) : (!vt.value, !tfrt.chain) -> (!tfrt.chain)
  // Both results alias one value: it is destroyed once, after its last use.
  // CHECK-NEXT: destroyed vt.value(3)
  // CHECK-NOT: destroyed
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Not running 'repeat_inc' because it has arguments.
func.func @repeat_inc(%n: i32) -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %x = "vt.constant"() {value = 10 : i32} : () -> !vt.value
  %y = tfrt.repeat.i32 %n, %x : !vt.value {
    %one = "vt.constant"() {value = 1 : i32} : () -> !vt.value
    %r = "vt.add"(%one, %x) : (!vt.value, !vt.value) -> !vt.value
    tfrt.return %r : !vt.value
  }
  %ch1 = "vt.print"(%y, %ch0) : (!vt.value, !tfrt.chain) -> (!tfrt.chain)
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'repeat_2_inc'
func.func @repeat_2_inc() -> !tfrt.chain {
  %n = tfrt.constant.i32 2
  // CHECK: print vt_value(12)
  // CHECK-NEXT: destroyed vt.value(12)
  %ch = tfrt.call @repeat_inc(%n) : (i32) -> !tfrt.chain
  tfrt.return %ch : !tfrt.chain
}

// CHECK-LABEL: --- Running 'repeat_0_inc'
func.func @repeat_0_inc() -> !tfrt.chain {
  %n = tfrt.constant.i32 0
  // CHECK: print vt_value(10)
  // CHECK-NEXT: destroyed vt.value(10)
  %ch = tfrt.call @repeat_inc(%n) : (i32) -> !tfrt.chain
  tfrt.return %ch : !tfrt.chain
}

// CHECK-LABEL: --- Running 'tutorial'
func.func @tutorial() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %x = tfrt.constant.i32 2
  %y = tfrt.constant.i32 -4
  %c = "tfrt_tutorial.create_coordinate"(%x, %y) : (i32, i32) -> !my.coordinate
  // CHECK-NEXT: (2, -4)
  %ch1 = "tfrt_tutorial.print_coordinate"(%c, %ch0) : (!my.coordinate, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1 : !tfrt.chain
}
