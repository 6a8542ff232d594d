// RUN: tfrt_translate --bef-to-mlir %s.bef | FileCheck %s

// Reconstruction of TFRT's mlir_tests/mlir_to_bef/modules.mlir: a nested module with
// the `tfrt.compiled` attribute, referenced by a kernel's symbol attribute, is encoded as a
// compilation unit.

// The compiled module comes back from the BEF, and the kernel still refers to it.
// CHECK: module @kernels attributes {tfrt.compiled}
// CHECK: func.func @main(%arg0: i32) -> i32
// CHECK-LABEL: func.func @compiled_module()
// CHECK-NEXT: "simple.kernel"() {kernel = @kernels::@main}
module @kernels attributes {tfrt.compiled} {
  func.func @main(%arg0: i32) -> i32 {
    func.return %arg0 : i32
  }
}

func.func @compiled_module() {
  "simple.kernel"() {kernel = @kernels::@main} : () -> ()
  tfrt.return
}
