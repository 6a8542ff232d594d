// A --kernels file may not silently take the place of a built-in kernel.
// RUN: not bef_executor --kernels tests/lit/robustness_values/Inputs/replace_add.py %s.bef 2>&1 | FileCheck %s --check-prefix=CLASH
// CLASH: bef_executor: kernels from 'tests/lit/robustness_values/Inputs/replace_add.py': kernel 'tfrt.add.i32' is already registered (register it with override=True to replace it)
// CLASH-NOT: Running

// Without the file, the built-in kernel runs (7 + 2).
// RUN: bef_executor %s.bef | FileCheck %s --check-prefix=BUILTIN
// BUILTIN: 'add' returned 9
// BUILTIN: 'mul' returned 14

// Asking to override (in @kernel or in add_kernel) replaces it (7 - 2); the other built-in
// kernels of the same library still run.
// RUN: bef_executor --kernels tests/lit/robustness_values/Inputs/override_add.py %s.bef | FileCheck %s --check-prefix=OVERRIDE
// RUN: bef_executor --kernels tests/lit/robustness_values/Inputs/override_registry.py %s.bef | FileCheck %s --check-prefix=OVERRIDE
// OVERRIDE: 'add' returned 5
// OVERRIDE: 'mul' returned 14

func.func @add() -> i32 {
  %a = tfrt.constant.i32 7
  %b = tfrt.constant.i32 2
  %c = tfrt.add.i32 %a, %b
  tfrt.return %c : i32
}

func.func @mul() -> i32 {
  %a = tfrt.constant.i32 7
  %b = tfrt.constant.i32 2
  %c = tfrt.mul.i32 %a, %b
  tfrt.return %c : i32
}
