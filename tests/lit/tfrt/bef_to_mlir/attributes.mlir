// RUN: tfrt_translate -bef-to-mlir %s.bef | tfrt_opt -allow-unregistered-dialect | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_to_mlir/attributes.mlir: every
// attribute kind survives the MLIR -> BEF -> MLIR round trip.

// CHECK-LABEL: func.func @bool_attrs
func.func @bool_attrs() {
  // CHECK: "simple.op"() {value = true} : () -> ()
  "simple.op"() {value = true} : () -> ()
  // CHECK: "simple.op"() {value = false} : () -> ()
  "simple.op"() {value = false} : () -> ()
  tfrt.return
}

// CHECK-LABEL: func.func @integer_attrs
func.func @integer_attrs() {
  // CHECK: "simple.op"() {value = 1 : i8} : () -> ()
  "simple.op"() {value = 1 : i8} : () -> ()
  // CHECK: "simple.op"() {value = -2 : i16} : () -> ()
  "simple.op"() {value = -2 : i16} : () -> ()
  // CHECK: "simple.op"() {value = 3 : i32} : () -> ()
  "simple.op"() {value = 3 : i32} : () -> ()
  // CHECK: "simple.op"() {value = 4} : () -> ()
  "simple.op"() {value = 4 : i64} : () -> ()
  // CHECK: "simple.op"() {value = 5 : ui32} : () -> ()
  "simple.op"() {value = 5 : ui32} : () -> ()
  tfrt.return
}

// CHECK-LABEL: func.func @float_attrs
func.func @float_attrs() {
  // CHECK: "simple.op"() {value = 1.000000e+00 : f32} : () -> ()
  "simple.op"() {value = 1.0 : f32} : () -> ()
  // CHECK: "simple.op"() {value = -2.500000e+00} : () -> ()
  "simple.op"() {value = -2.5 : f64} : () -> ()
  tfrt.return
}

// CHECK-LABEL: func.func @string_attrs
func.func @string_attrs() {
  // CHECK: "simple.op"() {value = "string"} : () -> ()
  "simple.op"() {value = "string"} : () -> ()
  // CHECK: "simple.op"() {value = ""} : () -> ()
  "simple.op"() {value = ""} : () -> ()
  tfrt.return
}

// CHECK-LABEL: func.func @array_attrs
func.func @array_attrs() {
  // CHECK: "simple.op"() {value = [1 : i32, 2 : i32]} : () -> ()
  "simple.op"() {value = [1 : i32, 2 : i32]} : () -> ()
  // CHECK: "simple.op"() {value = [1.000000e+00 : f32, 2.000000e+00 : f32]} : () -> ()
  "simple.op"() {value = [1.0 : f32, 2.0 : f32]} : () -> ()
  // CHECK: "simple.op"() {value = []} : () -> ()
  "simple.op"() {value = []} : () -> ()
  tfrt.return
}

// CHECK-LABEL: func.func @aggregate_attrs
func.func @aggregate_attrs() {
  // CHECK: "simple.op"() {value = ["string", [1 : i32, 0 : i32], 1.000000e+00 : f32]} : () -> ()
  "simple.op"() {value = ["string", [1 : i32, 0 : i32], 1.0 : f32]} : () -> ()
  tfrt.return
}

// CHECK-LABEL: func.func @type_attrs
func.func @type_attrs() {
  // CHECK: "simple.op"() {value = i32} : () -> ()
  "simple.op"() {value = i32} : () -> ()
  // CHECK: "simple.op"() {value = f32} : () -> ()
  "simple.op"() {value = f32} : () -> ()
  tfrt.return
}

// CHECK-LABEL: func.func @dense_attrs
func.func @dense_attrs() {
  // CHECK: "simple.op"() {value = dense<[1, 2]> : tensor<2xi32>} : () -> ()
  "simple.op"() {value = dense<[1, 2]> : tensor<2xi32>} : () -> ()
  tfrt.return
}

// CHECK-LABEL: func.func @constants
func.func @constants() -> (i1, i32, i64) {
  // CHECK: tfrt.constant.i1 true
  %a = tfrt.constant.i1 1
  // CHECK: tfrt.constant.i32 42
  %b = tfrt.constant.i32 42
  // CHECK: tfrt.constant.i64 -7
  %c = tfrt.constant.i64 -7
  tfrt.return %a, %b, %c : i1, i32, i64
}
