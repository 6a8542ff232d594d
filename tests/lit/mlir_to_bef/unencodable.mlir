// RUN: tfrt_translate -mlir-to-bef -split-input-file -verify-diagnostics %s
// RUN: not tfrt_translate -mlir-to-bef %s -o %t.bef 2>&1 | FileCheck %s
// no_bef_translation

// An attribute BEF has no encoding for is a diagnostic at the op, not a traceback.
// CHECK: unencodable.mlir:10:3: error: BEF files cannot encode the 'shape_type' attribute
// CHECK-NOT: Traceback
func.func @f() {
  // expected-error @+1 {{BEF files cannot encode the 'shape_type' attribute}}
  "my.op"() {shape_type = tensor<2xf32>} : () -> ()
  tfrt.return
}
