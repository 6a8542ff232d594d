// RUN: tfrt_translate -bef-to-mlir %s.bef | tfrt_opt -allow-unregistered-dialect | FileCheck %s

// CHECK-LABEL: func.func @attrs()
func.func @attrs() {
  // CHECK: "simple.op"() {value = 1 : i32}
  "simple.op"() {value = 1 : i32} : () -> ()
  // CHECK: "simple.op"() {value = true}
  "simple.op"() {value = true} : () -> ()
  // CHECK: "simple.op"() {value = -7}
  "simple.op"() {value = -7 : i64} : () -> ()
  // CHECK: "simple.op"() {value = 2.500000e+00 : f32}
  "simple.op"() {value = 2.5 : f32} : () -> ()
  // CHECK: "simple.op"() {value = "hello"}
  "simple.op"() {value = "hello"} : () -> ()
  // CHECK: "simple.op"() {value = [1 : i32, 2 : i32]}
  "simple.op"() {value = [1 : i32, 2 : i32]} : () -> ()
  // CHECK: "simple.op"() {value = {{\[}}["a", [1 : i32]], 1.000000e+00 : f32]}
  "simple.op"() {value = [["a", [1 : i32]], 1.0 : f32]} : () -> ()
  // CHECK: "simple.op"() {value = f32}
  "simple.op"() {value = f32} : () -> ()
  // CHECK: "simple.op"() {value = dense<[1, 2, 3]> : tensor<3xi32>}
  "simple.op"() {value = dense<[1, 2, 3]> : tensor<3xi32>} : () -> ()
  // CHECK: "simple.op"() {value = #corert.shape<2x?x3>}
  "simple.op"() {value = #corert.shape<2x?x3>} : () -> ()
  tfrt.return
}
