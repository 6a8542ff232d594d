// RUN: bef_executor_lite %s.bef 2>&1 | FileCheck %s --dump-input=fail
// RUN: env PYTFRT_TFRT_REVISION=de22adc4 bef_executor_lite %s.bef 2>&1 | FileCheck %s --check-prefix=OLD

// Reconstruction of TFRT's mlir_tests/bef_executor/debug_info.mlir: the debug
// info of NameLoc, FusedLoc and CallSiteLoc locations.  A fused location's is its named parts
// joined, "" if it has none (TFRT's main branch); at TFRT de22adc4 it was the first named
// part, none if there was none (OLD).

// CHECK-LABEL: --- Running 'print_debug_info'
// OLD-LABEL: --- Running 'print_debug_info'
// OLD-NEXT: foo
// OLD-NEXT: Kernel has no debug info
// OLD-NEXT: {{^bar$}}
// OLD-NEXT: {{^foo$}}
// OLD-NEXT: baz
// OLD-NEXT: Kernel has no debug info
// OLD-NEXT: qux
// OLD-NEXT: Kernel has no debug info
func.func @print_debug_info() -> !tfrt.chain {
  %ch0 = tfrt.new.chain

  // CHECK-NEXT: foo
  %ch1 = "tfrt_test.print_debug_info"(%ch0) : (!tfrt.chain) -> !tfrt.chain loc("foo")

  // CHECK-NEXT: Kernel has no debug info
  %ch2 = "tfrt_test.print_debug_info"(%ch1) : (!tfrt.chain) -> !tfrt.chain

  // CHECK-NEXT: bar
  %ch3 = "tfrt_test.print_debug_info"(%ch2) : (!tfrt.chain) -> !tfrt.chain loc(fused["bar", "test.mlir":1:1])

  // CHECK-NEXT: {{^foobar$}}
  %ch4 = "tfrt_test.print_debug_info"(%ch3) : (!tfrt.chain) -> !tfrt.chain loc(fused["foo", "bar"])

  // CHECK-NEXT: baz
  %ch5 = "tfrt_test.print_debug_info"(%ch4) : (!tfrt.chain) -> !tfrt.chain loc(callsite("baz" at "test.mlir":2:3))

  // CHECK-NEXT: Kernel has no debug info
  %ch6 = "tfrt_test.print_debug_info"(%ch5) : (!tfrt.chain) -> !tfrt.chain loc(callsite("test.mlir":4:5 at "baz"))

  // CHECK-NEXT: qux
  %ch7 = "tfrt_test.print_debug_info"(%ch6) : (!tfrt.chain) -> !tfrt.chain loc("qux"("test.mlir":6:7))

  // CHECK-NEXT: {{^$}}
  %ch8 = "tfrt_test.print_debug_info"(%ch7) : (!tfrt.chain) -> !tfrt.chain loc(fused["a.mlir":1:1, "b.mlir":2:2])

  tfrt.return %ch8 : !tfrt.chain
}
