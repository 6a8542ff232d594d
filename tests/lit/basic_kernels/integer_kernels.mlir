// Integer, boolean and print kernels of the tfrt dialect (docs/conformance.md).
// RUN: bef_executor %s.bef 2>&1 | FileCheck %s

// CHECK-LABEL: --- Running 'wrap_around'
func.func @wrap_around() {
  %ch0 = tfrt.new.chain
  %max = tfrt.constant.i32 2147483647
  %one = tfrt.constant.i32 1
  %min = tfrt.constant.i32 -2147483648

  // CHECK-NEXT: int32 = -2147483648
  %a = tfrt.add.i32 %max, %one
  %ch1 = tfrt.print.i32 %a, %ch0
  // CHECK-NEXT: int32 = 2147483647
  %b = tfrt.minus.i32 %min, %one
  %ch2 = tfrt.print.i32 %b, %ch1
  // CHECK-NEXT: int32 = 2147483647
  %c = tfrt.mul.i32 %max, %max
  %c2 = tfrt.mul.i32 %c, %max
  %ch3 = tfrt.print.i32 %c2, %ch2

  %max64 = tfrt.constant.i64 9223372036854775807
  %one64 = tfrt.constant.i64 1
  // CHECK-NEXT: int64 = -9223372036854775808
  %d = tfrt.add.i64 %max64, %one64
  %ch4 = tfrt.print.i64 %d, %ch3
  // CHECK-NEXT: int64 = 9223372036854775806
  %e = tfrt.minus.i64 %max64, %one64
  %ch5 = tfrt.print.i64 %e, %ch4
  // CHECK-NEXT: int64 = 9223372036854775807
  %f = tfrt.mul.i64 %max64, %max64
  %g = tfrt.mul.i64 %f, %max64
  %ch6 = tfrt.print.i64 %g, %ch5
  tfrt.return
}

// CHECK-LABEL: --- Running 'division'
func.func @division() -> i32 {
  %ch0 = tfrt.new.chain
  %a = tfrt.constant.i32 -7
  %b = tfrt.constant.i32 2
  // CHECK-NEXT: int32 = -3
  // CHECK-NEXT: int32 = -1
  %q, %r = tfrt.div.i32 %a, %b
  %ch1 = tfrt.print.i32 %q, %ch0
  %ch2 = tfrt.print.i32 %r, %ch1

  %c = tfrt.constant.i64 7
  %d = tfrt.constant.i64 -2
  // CHECK-NEXT: int64 = -3
  // CHECK-NEXT: int64 = 1
  %q2, %r2 = tfrt.div.i64 %c, %d
  %ch3 = tfrt.print.i64 %q2, %ch2
  %ch4 = tfrt.print.i64 %r2, %ch3
  // CHECK-NEXT: 'division' returned -3
  tfrt.return %q : i32
}

// CHECK-LABEL: --- Running 'divide_by_zero'
func.func @divide_by_zero() -> (i32, i32) {
  %a = tfrt.constant.i32 7
  %zero = tfrt.constant.i32 0
  // expected-error @+1 {{runtime error: Divide by zero}}
  %q, %r = tfrt.div.i32 %a, %zero
  // CHECK-NEXT: 'divide_by_zero' returned <<error: Divide by zero>>,<<error: Divide by zero>>
  tfrt.return %q, %r : i32, i32
}

// CHECK-LABEL: --- Running 'comparisons'
func.func @comparisons() {
  %ch0 = tfrt.new.chain
  %a = tfrt.constant.i32 3
  %b = tfrt.constant.i32 4
  // CHECK-NEXT: int1 = 1
  %le = "tfrt.lessequal.i32"(%a, %b) : (i32, i32) -> i1
  %ch1 = tfrt.print.i1 %le, %ch0
  // CHECK-NEXT: int1 = 0
  %ge = "tfrt.lessequal.i32"(%b, %a, %ch1) : (i32, i32, !tfrt.chain) -> i1
  %ch2 = tfrt.print.i1 %ge, %ch1
  // CHECK-NEXT: int1 = 0
  %eq = tfrt.equal.i32 %a, %b
  %ch3 = tfrt.print.i1 %eq, %ch2
  %x = tfrt.constant.i64 -1
  %y = tfrt.constant.i64 -1
  // CHECK-NEXT: int1 = 1
  %eq64 = tfrt.equal.i64 %x, %y
  %ch4 = tfrt.print.i1 %eq64, %ch3
  // CHECK-NEXT: int1 = 1
  %le64 = tfrt.lessequal.i64 %x, %y
  %ch5 = tfrt.print.i1 %le64, %ch4
  %t = tfrt.constant.i1 1
  %f = tfrt.constant.i1 0
  // CHECK-NEXT: int1 = 0
  %and1 = tfrt.and.i1 %t, %f
  %ch6 = tfrt.print.i1 %and1, %ch5
  // CHECK-NEXT: int1 = 1
  %and2 = tfrt.and.i1 %t, %t
  %ch7 = tfrt.print.i1 %and2, %ch6
  tfrt.return
}

// CHECK-LABEL: --- Running 'constants_returned'
func.func @constants_returned() -> (i1, i32, i64, ui32) {
  %a = tfrt.constant.i1 1
  %b = tfrt.constant.i32 -42
  %c = tfrt.constant.i64 1099511627776
  %d = tfrt.constant.ui32 4294967295
  // CHECK-NEXT: 'constants_returned' returned 1,-42,1099511627776,ui32 value
  tfrt.return %a, %b, %c, %d : i1, i32, i64, ui32
}

// CHECK-LABEL: --- Running 'chains'
func.func @chains() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %x = tfrt.constant.i32 1
  %ch1 = tfrt.merge.chains %ch0, %x : !tfrt.chain, i32
  // CHECK-NEXT: 'chains' returned !tfrt.chain value
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'device'
func.func @device() -> !tfrt.device {
  %ch0 = tfrt.new.chain
  %d = tfrt.get_device %ch0 {device_name = "CPU:0"}
  // CHECK-NEXT: 'device' returned !tfrt.device value
  tfrt.return %d : !tfrt.device
}

// CHECK-LABEL: --- Running 'sync_integers'
func.func @sync_integers() -> i32 attributes {tfrt.sync} {
  %a = "tfrt.constant_s.i32"() {value = 2147483647 : i32} : () -> i32
  %b = "tfrt.constant_s.i32"() {value = 3 : i32} : () -> i32
  %c = "tfrt.add_s.i32"(%a, %b) : (i32, i32) -> i32
  %d = "tfrt.mul_s.i32"(%c, %b) : (i32, i32) -> i32
  // CHECK-NEXT: 'sync_integers' returned -2147483642
  tfrt.return %d : i32
}
