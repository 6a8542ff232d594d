// RUN: bef_executor %s.bef | FileCheck %s
// RUN: tfrt_opt %s | FileCheck %s --check-prefix=IR

// A hexadecimal literal of a float type is the float's bit pattern, as MLIR reads it.

// CHECK-LABEL: --- Running 'hex_floats'
func.func @hex_floats() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  // IR: tfrt.constant.f32 0x7fc00000
  %nan = tfrt.constant.f32 0x7FC00000
  // CHECK-NEXT: f32 = nan
  %ch1 = tfrt.print.f32 %nan, %ch0
  // IR: tfrt.constant.f32 -1.000000e+00
  %m1 = tfrt.constant.f32 0xBF800000
  // CHECK-NEXT: f32 = -1.000000
  %ch2 = tfrt.print.f32 %m1, %ch1
  // IR: tfrt.constant.f64 0x7ff8000000000000
  %dnan = tfrt.constant.f64 0x7FF8000000000000
  // IR: tfrt.constant.f64 2.500000e-01
  %q = tfrt.constant.f64 0x3FD0000000000000
  // CHECK-NEXT: f64 = 0.250000
  %ch3 = tfrt.print.f64 %q, %ch2
  // IR: tfrt.constant.f16 1.000000e+00
  %h = tfrt.constant.f16 0x3C00
  tfrt.return %ch3 : !tfrt.chain
}

// bfloat16 is the upper half of an f32 (checked on the IR only: this function takes an
// argument, so bef_executor does not run it).
// IR-LABEL: func.func @bf16
func.func @bf16(%x: i32) {
  // IR: tfrt.constant.bf16 -2.000000e+00
  %b = tfrt.constant.bf16 0xC000
  tfrt.return
}
