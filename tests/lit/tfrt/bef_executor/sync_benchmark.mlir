// RUN: bef_executor_lite %s.bef | FileCheck %s --dump-input=fail
// RUN: tfrt_opt %s | tfrt_opt

// Reconstruction of TFRT's mlir_tests/bef_executor/sync_benchmark.mlir.

// CHECK-LABEL: --- Not running 'fibonacci.i32' because it has arguments
func.func @fibonacci.i32(%0: i32, %1: i32) attributes {tfrt.sync} {
  %2 = "tfrt.add_s.i32"(%0, %1) : (i32, i32) -> i32
  %3 = "tfrt.add_s.i32"(%1, %2) : (i32, i32) -> i32
  %4 = "tfrt.add_s.i32"(%2, %3) : (i32, i32) -> i32
  %5 = "tfrt.add_s.i32"(%3, %4) : (i32, i32) -> i32
  tfrt.return
}

// CHECK-LABEL: --- Running 'benchmark'
func.func @benchmark() attributes {tfrt.sync} {
  %0 = "tfrt.constant_s.i32"() {value = 0 : i32} : () -> i32
  %1 = "tfrt.constant_s.i32"() {value = 1 : i32} : () -> i32

  // CHECK: BM:fibonacci.i32:Duration(ns):
  // CHECK: BM:fibonacci.i32:Count: 100
  // CHECK: BM:fibonacci.i32:Time Min(ns):
  // CHECK: BM:fibonacci.i32:Time 50%(ns):
  // CHECK: BM:fibonacci.i32:Time 95%(ns):
  // CHECK: BM:fibonacci.i32:Time 99%(ns):
  tfrt_test.sync_benchmark @fibonacci.i32(%0 : i32, %1 : i32) duration_secs = 100, max_count = 100, num_warmup_runs = 10
  tfrt.return
}
