// RUN: bef_executor %s.bef | FileCheck %s
// RUN: tfrt_opt %s | FileCheck %s --check-prefix=IR

// A bf16 constant is a value of its own type at run time (it used to be refused by the
// executor's result check) and prints its raw 16-bit pattern, as tfrt.print.f16 does.

// CHECK-LABEL: --- Running 'bf16_constants'
func.func @bf16_constants() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  // IR: tfrt.constant.bf16 1.500000e+00
  %a = tfrt.constant.bf16 1.5
  // CHECK-NEXT: bf16 = 16320
  %ch1 = "tfrt.print.bf16"(%a, %ch0) : (bf16, !tfrt.chain) -> !tfrt.chain
  // IR: tfrt.constant.bf16 -2.000000e+00
  %b = tfrt.constant.bf16 0xC000
  // CHECK-NEXT: bf16 = 49152
  %ch2 = "tfrt.print.bf16"(%b, %ch1) : (bf16, !tfrt.chain) -> !tfrt.chain
  // 2.5 is exact in bf16 (0x4020); 3.0078125 rounds to nearest even (3.0, 0x4040).
  %c = tfrt.constant.bf16 2.5
  // CHECK-NEXT: bf16 = 16416
  %ch3 = "tfrt.print.bf16"(%c, %ch2) : (bf16, !tfrt.chain) -> !tfrt.chain
  %d = tfrt.constant.bf16 3.0078125
  // CHECK-NEXT: bf16 = 16448
  %ch4 = "tfrt.print.bf16"(%d, %ch3) : (bf16, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: 'bf16_constants' returned !tfrt.chain value
  tfrt.return %ch4 : !tfrt.chain
}
