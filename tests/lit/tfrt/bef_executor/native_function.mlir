// RUN: bef_executor_lite %s.bef 2>&1 | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_executor/native_function.mlir: native
// functions called through tfrt.call.

func.func private @native_add(%a: i32, %b: i32) -> i32 attributes {tfrt.native}
func.func private @native_async_add(%a: i32, %b: i32) -> i32 attributes {tfrt.native}
func.func private @native_error(%a: i32, %b: i32) -> i32 attributes {tfrt.native}

// CHECK-LABEL: --- Running 'call_native_add'
func.func @call_native_add() {
  %ch0 = tfrt.new.chain
  %a = tfrt.constant.i32 1
  %b = tfrt.constant.i32 2
  %r = tfrt.call @native_add(%a, %b) : (i32, i32) -> i32
  // CHECK-NEXT: int32 = 3
  %ch1 = tfrt.print.i32 %r, %ch0
  tfrt.return
}

// CHECK-LABEL: --- Running 'call_native_async_add'
func.func @call_native_async_add() {
  %ch0 = tfrt.new.chain
  %a = tfrt.constant.i32 1
  %b = tfrt.constant.i32 2
  %c = "tfrt_test.async_add.i32"(%a, %b) : (i32, i32) -> i32
  %r = tfrt.call @native_async_add(%c, %b) : (i32, i32) -> i32
  // CHECK-NEXT: int32 = 5
  %ch1 = tfrt.print.i32 %r, %ch0
  tfrt.return
}

// CHECK-LABEL: --- Running 'call_native_error'
func.func @call_native_error() -> i32 {
  %a = tfrt.constant.i32 1
  %b = tfrt.constant.i32 2
  %c = tfrt_test.do.async %a, %b : (i32, i32) -> (i32) {
    %s = tfrt.add.i32 %a, %b
    tfrt.return %s : i32
  }
  %r = tfrt.call @native_error(%c, %b) : (i32, i32) -> i32
  // CHECK-NEXT: 'call_native_error' returned <<error: {{.+}}>>
  tfrt.return %r : i32
}
