// RUN: not tfrt_opt %s 2>&1 | FileCheck %s
// no_bef_translation

// A custom-syntax op nobody defines is named in the error, with the closest known op.
// CHECK: unknown_op.mlir:9:8: error: custom op 'tfrt.ad.i32' is unknown (did you mean 'tfrt.add.i32'?)
func.func @misspelled() -> i32 {
  %a = tfrt.constant.i32 1
  // The next line is the misspelled op.
  %b = tfrt.ad.i32 %a, %a
  tfrt.return %b : i32
}
