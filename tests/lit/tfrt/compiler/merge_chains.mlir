// RUN: tfrt_opt -canonicalize --split-input-file %s | FileCheck %s --dump-input=fail
// no_bef_translation

// Reconstruction of TFRT's mlir_tests/compiler/merge_chains.mlir: canonicalization of
// tfrt.merge.chains drops operands that have other uses; with none left the op folds away.

// CHECK-LABEL: func @merge_chains_fold
func.func @merge_chains_fold(%ch0: !tfrt.chain) -> (!tfrt.chain, !tfrt.chain) {
  // CHECK-NOT: tfrt.merge.chains
  %ch1 = tfrt.merge.chains %ch0 : !tfrt.chain
  // CHECK: tfrt.return %arg0, %arg0 : !tfrt.chain, !tfrt.chain
  tfrt.return %ch0, %ch1 : !tfrt.chain, !tfrt.chain
}

// -----

// CHECK-LABEL: func @merge_chains_keep
func.func @merge_chains_keep(%ch0: !tfrt.chain, %ch1: !tfrt.chain) -> !tfrt.chain {
  // CHECK: tfrt.merge.chains %arg0, %arg1 : !tfrt.chain, !tfrt.chain
  %ch2 = tfrt.merge.chains %ch0, %ch1 : !tfrt.chain, !tfrt.chain
  tfrt.return %ch2 : !tfrt.chain
}
