// RUN: od -t x1 %s.bef | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/mlir_to_bef/encoding.mlir: a BEF file starts
// with the magic bytes 0B EF.

// CHECK: 0000000 0b ef
