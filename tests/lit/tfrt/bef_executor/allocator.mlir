// RUN: bef_executor_lite %s.bef --host_allocator_type test_fixed_size_1k 2>&1 | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_executor/allocator.mlir (docs/executor.md,
// Scheduling): three independent tensor creations land in three streams; x0 runs inline,
// x2 and x1 run as tasks in stream-id order, so x2 (4160 bytes) is refused before x1 allocates.
// Each unused tensor is freed right after its kernel (docs/executor.md).

// CHECK-LABEL: --- Running 'fixed_size_allocator'
func.func @fixed_size_allocator() {
  // CHECK: Allocating 192 bytes. 832 remaining.
  // CHECK: Attempted to allocate 4160 bytes. However current capacity is only 1024.
  // CHECK: Allocating 192 bytes. 832 remaining.
  %x0 = tfrt_dht.create_uninitialized_tensor.f32.1 [32 : i64]
  %x1 = tfrt_dht.create_uninitialized_tensor.f32.1 [32 : i64]
  // expected-error @+1 {{runtime error: Cannot allocate tensor}}
  %x2 = tfrt_dht.create_uninitialized_tensor.f32.1 [1024 : i64]
  tfrt.return
}
