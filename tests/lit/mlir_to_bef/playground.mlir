// RUN: tfrt_translate -mlir-to-bef %S/Inputs/nqueens.mlir -o %t.bef
// RUN: tfrt_translate -bef-to-mlir %t.bef | FileCheck %s
// RUN: tfrt_translate -mlir-to-bef %S/Inputs/mlp_xor.mlir | tfrt_translate -bef-to-mlir | FileCheck %s --check-prefix=XOR
// The playground programs (examples/mlp_xor/README.md) compile as written in 2020 syntax.

// CHECK-LABEL: func.func @nqueen()
// CHECK: tfrt.constant.i32 14
// CHECK: "nqueens.i32"
// CHECK: tfrt.print.i32
// XOR: func.func @test_sigmoid()
// XOR: func.func @test_sigmoid_gradient()
// XOR: func.func @xor_inference()
// XOR: tfrt.merge.chains
// XOR: "eigen.matmul.f32"
