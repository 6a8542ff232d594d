// tfrt_test.memory_leak_one_int32 allocates 4 bytes that are never freed: the default
// leak-check allocator reports them at exit and the process fails (docs/host.md).
// RUN: not bef_executor %s.bef | FileCheck %s

// CHECK-LABEL: --- Running 'leak'
func.func @leak() {
  "tfrt_test.memory_leak_one_int32"() : () -> ()
  tfrt.return
}
// CHECK: Memory leak detected: 1 alive allocations, 4 alive bytes
