// RUN: bef_executor_lite %s.bef 2>&1 | FileCheck %s
// RUN: bef_executor %s 2>&1 | FileCheck %s
// RUN: env PYTFRT_TFRT_REVISION=de22adc4 bef_executor %s 2>&1 | FileCheck %s --check-prefix=OLD

// Location aliases may be used before their definition at the end of the file (as MLIR's
// printer writes them); the kernel's debug info comes from the aliased location.  A fused
// location's debug info is its named parts joined (TFRT de22adc4: its first named part).

// CHECK-LABEL: --- Running 'aliased':
// CHECK-NEXT: {{^outer/first$}}
// CHECK-NEXT: {{^secondother$}}
// CHECK-NEXT: {{^thirdfourth$}}
// OLD-LABEL: --- Running 'aliased':
// OLD-NEXT: {{^outer/first$}}
// OLD-NEXT: {{^second$}}
// OLD-NEXT: {{^third$}}
func.func @aliased() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %ch1 = "tfrt_test.print_debug_info"(%ch0) : (!tfrt.chain) -> !tfrt.chain loc(#first)
  %ch2 = "tfrt_test.print_debug_info"(%ch1) : (!tfrt.chain) -> !tfrt.chain loc(#fused)
  %ch3 = "tfrt_test.print_debug_info"(%ch2) : (!tfrt.chain) -> !tfrt.chain loc(fused["x.py":1:2, "third", "fourth"])
  tfrt.return %ch3 : !tfrt.chain
}

#first = loc("outer/first")
#fused = loc(fused["second", "other"])
