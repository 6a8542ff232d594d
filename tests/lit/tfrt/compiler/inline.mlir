// RUN: tfrt_opt -inline %s | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/compiler/inline.mlir: the tfrt.call of a private
// callee is inlined and the callee disappears.

// CHECK-NOT: func private @callee
func.func private @callee(%ch: !tfrt.chain) -> (!tfrt.chain, !corert.tensorhandle) {
  %t = corert.const_dense_tensor dense<[0, 1, 2]> : tensor<3xi32>
  tfrt.return %ch, %t : !tfrt.chain, !corert.tensorhandle
}

// CHECK-LABEL: func @caller
func.func @caller(%ch0: !tfrt.chain) -> (!tfrt.chain, !corert.tensorhandle) {
  // CHECK-NOT: tfrt.call
  // CHECK: [[T:%.*]] = corert.const_dense_tensor dense<[0, 1, 2]> : tensor<3xi32>
  // CHECK-NOT: tfrt.call
  %ch1, %t = tfrt.call @callee(%ch0) : (!tfrt.chain) -> (!tfrt.chain, !corert.tensorhandle)
  // CHECK: tfrt.return %arg0, [[T]] : !tfrt.chain, !corert.tensorhandle
  tfrt.return %ch1, %t : !tfrt.chain, !corert.tensorhandle
}
