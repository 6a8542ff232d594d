// RUN: cat %s.bef | not bef_executor_lite 2>&1 | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_executor/memory_leak.mlir: the
// leak-check allocator reports the leaked allocation at exit and the driver exits 1.

// CHECK-LABEL: --- Running 'memory_leak'
// CHECK: Memory leak detected: 1 alive allocations, 4 alive bytes
func.func @memory_leak() {
  "tfrt_test.memory_leak_one_int32"() : () -> ()
  tfrt.return
}
