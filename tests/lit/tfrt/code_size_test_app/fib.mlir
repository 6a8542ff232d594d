// RUN: cat %s.bef | code_size_test_driver | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/code_size_test_app/fib.mlir: a recursive
// fibonacci with only the integer and control-flow kernels, run by the minimal driver.

// CHECK: --- Not running 'fib' because it has arguments.
func.func @fib(%arg: i32) -> i32 {
  %one = tfrt.constant.i32 1
  %cond = "tfrt.lessequal.i32"(%arg, %one) : (i32, i32) -> (i1)
  %res = tfrt.if %cond, %arg : (i32) -> (i32) {
    tfrt.return %arg : i32
  } else {
    %c1 = tfrt.constant.i32 1
    %c2 = tfrt.constant.i32 2
    %n1 = tfrt.minus.i32 %arg, %c1
    %n2 = tfrt.minus.i32 %arg, %c2
    %f1 = tfrt.call @fib(%n1) : (i32) -> i32
    %f2 = tfrt.call @fib(%n2) : (i32) -> i32
    %sum = tfrt.add.i32 %f1, %f2
    tfrt.return %sum : i32
  }
  tfrt.return %res : i32
}

// CHECK-LABEL: --- Running 'fib_test'
func.func @fib_test() -> (i32, i32, i32, i32) {
  %c0 = tfrt.constant.i32 0
  %c4 = tfrt.constant.i32 4
  %c8 = tfrt.constant.i32 8
  %c16 = tfrt.constant.i32 16
  %f0 = tfrt.call @fib(%c0) : (i32) -> i32
  %f4 = tfrt.call @fib(%c4) : (i32) -> i32
  %f8 = tfrt.call @fib(%c8) : (i32) -> i32
  %f16 = tfrt.call @fib(%c16) : (i32) -> i32
  // CHECK-NEXT: 'fib_test' returned 0,3,21,987
  tfrt.return %f0, %f4, %f8, %f16 : i32, i32, i32, i32
}
