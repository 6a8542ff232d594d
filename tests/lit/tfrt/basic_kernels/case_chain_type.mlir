// RUN: bef_executor %s.bef 2>&1 | FileCheck %s
// RUN: tfrt_opt %s | FileCheck %s --check-prefix=OPT

// tfrt.case in both of TFRT's spellings: the earlier one leaves the leading chain out of the
// type (`(%ch, %a) : (i32) -> (i32)`), the later one writes it. Both parse to the same op,
// which prints in the later spelling.

func @plus1(%ch: !tfrt.chain, %x: i32) -> (!tfrt.chain, i32) {
  %one = tfrt.constant.i32 1
  %y = tfrt.add.i32 %x, %one
  tfrt.return %ch, %y : !tfrt.chain, i32
}

func @times2(%ch: !tfrt.chain, %x: i32) -> (!tfrt.chain, i32) {
  %y = tfrt.add.i32 %x, %x
  tfrt.return %ch, %y : !tfrt.chain, i32
}

// OPT-LABEL: func.func @both
// OPT: tfrt.case %{{.*}} [@plus1, @times2] (%{{.*}}, %{{.*}}) : (!tfrt.chain, i32) -> (!tfrt.chain, i32)
// OPT: tfrt.case %{{.*}} [@plus1, @times2] (%{{.*}}, %{{.*}}) : (!tfrt.chain, i32) -> (!tfrt.chain, i32)
// CHECK-LABEL: --- Running 'both'
func @both() -> (i32, i32) {
  %ch0 = tfrt.new.chain
  %zero = tfrt.constant.i32 0
  %one = tfrt.constant.i32 1
  %a = tfrt.constant.i32 20
  %ch1, %r0 = tfrt.case %zero [@plus1, @times2] (%ch0, %a) : (i32) -> (i32)
  %ch2, %r1 = tfrt.case %one [@plus1, @times2] (%ch1, %a) : (!tfrt.chain, i32) -> (!tfrt.chain, i32)
  // CHECK-NEXT: 'both' returned 21,40
  tfrt.return %r0, %r1 : i32, i32
}
