// tfrt_test.benchmark and tfrt_test.sync_benchmark print TFRT's eleven BM: lines (docs/conformance.md).
// RUN: bef_executor %s.bef | FileCheck %s

// CHECK-LABEL: --- Running 'benchmark'
func.func @benchmark() -> !tfrt.chain {
  %c = tfrt.constant.i32 42
  %ch = tfrt_test.benchmark "add.i32"(%c : i32) duration_secs = 10, max_count = 20, num_warmup_runs = 3 {
    %one = tfrt.constant.i32 1
    %x = tfrt.add.i32 %c, %one
    tfrt.return %x : i32
  }
  // CHECK-NEXT: BM:add.i32:Duration(ns): {{[0-9]+$}}
  // CHECK-NEXT: BM:add.i32:Count: 20
  // CHECK-NEXT: BM:add.i32:Time Min(ns): {{[0-9]+$}}
  // CHECK-NEXT: BM:add.i32:Time 50%(ns): {{[0-9]+$}}
  // CHECK-NEXT: BM:add.i32:Time 95%(ns): {{[0-9]+$}}
  // CHECK-NEXT: BM:add.i32:Time 99%(ns): {{[0-9]+$}}
  // CHECK-NEXT: BM:add.i32:CPU Min(ns): {{[0-9]+$}}
  // CHECK-NEXT: BM:add.i32:CPU 50%(ns): {{[0-9]+$}}
  // CHECK-NEXT: BM:add.i32:CPU 95%(ns): {{[0-9]+$}}
  // CHECK-NEXT: BM:add.i32:CPU 99%(ns): {{[0-9]+$}}
  // CHECK-NEXT: BM:add.i32:CPU utilization(percent): {{[0-9]\.[0-9]{6}e[+-][0-9]{2}$}}
  // CHECK-NEXT: 'benchmark' returned !tfrt.chain value
  tfrt.return %ch : !tfrt.chain
}

// CHECK-LABEL: --- Running 'benchmark_default_warmup'
func.func @benchmark_default_warmup() -> !tfrt.chain {
  %ch = tfrt_test.benchmark "noop"() duration_secs = 10, max_count = 5 {
    %x = tfrt.constant.i32 1
    tfrt.return %x : i32
  }
  // CHECK: BM:noop:Count: 5
  tfrt.return %ch : !tfrt.chain
}

// CHECK-LABEL: --- Not running 'sync_body' because it has arguments.
func.func @sync_body(%a: i32, %b: i32) attributes {tfrt.sync} {
  %s = "tfrt.add_s.i32"(%a, %b) : (i32, i32) -> i32
  tfrt.return
}

// CHECK-LABEL: --- Running 'sync_benchmark'
func.func @sync_benchmark() attributes {tfrt.sync} {
  %a = "tfrt.constant_s.i32"() {value = 1 : i32} : () -> i32
  %b = "tfrt.constant_s.i32"() {value = 2 : i32} : () -> i32
  tfrt_test.sync_benchmark @sync_body(%a : i32, %b : i32) duration_secs = 10, max_count = 7, num_warmup_runs = 2
  // CHECK-NEXT: BM:sync_body:Duration(ns): {{[0-9]+$}}
  // CHECK-NEXT: BM:sync_body:Count: 7
  // CHECK: BM:sync_body:CPU utilization(percent):
  tfrt.return
}
