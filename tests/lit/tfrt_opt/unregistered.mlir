// RUN: not tfrt_opt %s 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: tfrt_opt -allow-unregistered-dialect %s | FileCheck %s

func.func @f() {
  // ERR: unregistered.mlir:7:3: error: operation being parsed with an unregistered dialect
  // CHECK: "foo.bar"() {x = 1 : i32} : () -> ()
  "foo.bar"() {x = 1 : i32} : () -> ()
  tfrt.return
}
