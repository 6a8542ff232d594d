// RUN: tfrt_translate -bef-to-mlir %s.bef | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_to_mlir/modules.mlir: a nested
// `tfrt.compiled` module referenced by a kernel is restored from the BEF file.

// CHECK: module @kernels attributes {tfrt.compiled}
module @kernels attributes {tfrt.compiled} {
  // CHECK: func.func @main(%{{.*}}: i32) -> i32
  func.func @main(%arg0: i32) -> i32 {
    // CHECK: func.return
    func.return %arg0 : i32
  }
}

// CHECK-LABEL: func.func @compiled_module
func.func @compiled_module() {
  // CHECK: "simple.kernel"() {kernel = @kernels::@main}
  "simple.kernel"() {kernel = @kernels::@main} : () -> ()
  tfrt.return
}
