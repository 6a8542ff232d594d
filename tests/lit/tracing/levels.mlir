// Tracing levels: kernel scopes are debug-level; the default level keeps the driver and
// function scopes only; without --enable_tracing nothing is traced.
// RUN: bef_executor --enable_tracing %s.bef | FileCheck %s --check-prefix=DEFAULT
// RUN: bef_executor --enable_tracing --tracing_level=verbose %s.bef | FileCheck %s --check-prefix=DEFAULT
// RUN: bef_executor %s.bef | FileCheck %s --check-prefix=OFF
// RUN: not bef_executor --enable_tracing --tracing_level=loud %s.bef 2>&1 | FileCheck %s --check-prefix=BAD

// DEFAULT: --- Running 'add_one'
// DEFAULT-NEXT: int32 = 2
// DEFAULT-NEXT: --- Running 'add_two'
// DEFAULT-NEXT: int32 = 3
// DEFAULT-NEXT: Scope:Bef Executor
// DEFAULT-NEXT: Scope:Function: add_one
// DEFAULT-NEXT: End Scope
// DEFAULT-NEXT: Scope:Function: add_two
// DEFAULT-NEXT: End Scope
// DEFAULT-NEXT: End Scope
// DEFAULT-NOT: Scope

// OFF-NOT: Scope
// OFF-NOT: End Scope

// BAD: bef_executor: unknown tracing level 'loud' (expected default, verbose or debug)

func.func @add_one() {
  %ch0 = tfrt.new.chain
  %one = tfrt.constant.i32 1
  %x = tfrt.add.i32 %one, %one
  %ch1 = tfrt.print.i32 %x, %ch0
  tfrt.return
}

func.func @add_two() {
  %ch0 = tfrt.new.chain
  %one = tfrt.constant.i32 1
  %two = tfrt.constant.i32 2
  %x = tfrt.add.i32 %one, %two
  %ch1 = tfrt.print.i32 %x, %ch0
  tfrt.return
}
