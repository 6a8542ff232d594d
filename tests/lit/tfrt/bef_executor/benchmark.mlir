// RUN: bef_executor_lite %s.bef | FileCheck %s --dump-input=fail
// RUN: tfrt_opt %s | tfrt_opt

// Reconstruction of TFRT's mlir_tests/bef_executor/benchmark.mlir: the eleven
// `BM:` lines of tfrt_test.benchmark, and the default num_warmup_runs.

// CHECK-LABEL: --- Running 'benchmark'
func.func @benchmark() {
  %c = tfrt.constant.i32 42

  // CHECK: BM:add.i32:Duration(ns):
  // CHECK: BM:add.i32:Count: 100
  // CHECK: BM:add.i32:Time Min(ns):
  // CHECK: BM:add.i32:Time 50%(ns):
  // CHECK: BM:add.i32:Time 95%(ns):
  // CHECK: BM:add.i32:Time 99%(ns):
  // CHECK: BM:add.i32:CPU Min(ns):
  // CHECK: BM:add.i32:CPU 50%(ns):
  // CHECK: BM:add.i32:CPU 95%(ns):
  // CHECK: BM:add.i32:CPU 99%(ns):
  // CHECK: BM:add.i32:CPU utilization(percent):
  tfrt_test.benchmark "add.i32"(%c : i32) duration_secs = 100, max_count = 100, num_warmup_runs = 10 {
    %x = tfrt.add.i32 %c, %c
    tfrt.return %x : i32
  }

  tfrt.return
}

// CHECK-LABEL: --- Running 'benchmark2'
func.func @benchmark2() {
  %c = tfrt.constant.i32 42

  // CHECK: BM:add.i32:Duration(ns):
  // CHECK: BM:add.i32:Count: 100
  // CHECK: BM:add.i32:Time Min(ns):
  // CHECK: BM:add.i32:Time 50%(ns):
  // CHECK: BM:add.i32:Time 95%(ns):
  // CHECK: BM:add.i32:Time 99%(ns):
  // CHECK: BM:add.i32:CPU Min(ns):
  // CHECK: BM:add.i32:CPU 50%(ns):
  // CHECK: BM:add.i32:CPU 95%(ns):
  // CHECK: BM:add.i32:CPU 99%(ns):
  // CHECK: BM:add.i32:CPU utilization(percent):
  // The default num_warmup_runs is 1.
  tfrt_test.benchmark "add.i32"(%c : i32) duration_secs = 100, max_count = 100 {
    %x = tfrt.add.i32 %c, %c
    tfrt.return %x : i32
  }

  tfrt.return
}
