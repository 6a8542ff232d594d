// RUN: not tfrt_opt %s 2>&1 | FileCheck %s
// no_bef_translation

func.func @f() {
  %a = tfrt.constant.i32 1
  %b = tfrt.add.i32 %a, %missing
  tfrt.return
}
// CHECK: {{.*}}caret.mlir:6:25: error: use of undeclared SSA value name
// CHECK-NEXT: {{^}}  %b = tfrt.add.i32 %a, %missing
// CHECK-NEXT: {{^}}                        ^
