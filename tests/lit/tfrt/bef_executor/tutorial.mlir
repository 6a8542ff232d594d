// RUN: bef_executor_lite %s.bef 2>&1 | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_executor/tutorial.mlir.

// CHECK-LABEL: --- Running 'hello'
func.func @hello() {
  %ch0 = tfrt.new.chain
  %s = "tfrt_test.get_string"() { value = "hello world" } : () -> !tfrt.string
  // CHECK-NEXT: string = hello world
  %ch1 = "tfrt_test.print_string"(%s, %ch0) : (!tfrt.string, !tfrt.chain) -> !tfrt.chain
  tfrt.return
}

// CHECK-LABEL: --- Running 'hello_integers'
func.func @hello_integers() {
  %ch0 = tfrt.new.chain
  %one = tfrt.constant.i32 1
  // CHECK-NEXT: int32 = 1
  %ch1 = tfrt.print.i32 %one, %ch0
  %two = tfrt.constant.i32 2
  // CHECK-NEXT: int32 = 2
  %ch2 = tfrt.print.i32 %two, %ch1
  tfrt.return
}

// CHECK-LABEL: --- Running 'print_coordinate'
func.func @print_coordinate() {
  %ch0 = tfrt.new.chain
  %two = tfrt.constant.i32 2
  %four = tfrt.constant.i32 4
  %coordinate = "tfrt_tutorial.create_coordinate"(%two, %four) : (i32, i32) -> !my.coordinate
  // CHECK-NEXT: (2, 4)
  %ch1 = "tfrt_tutorial.print_coordinate"(%coordinate, %ch0) : (!my.coordinate, !tfrt.chain) -> !tfrt.chain
  tfrt.return
}
