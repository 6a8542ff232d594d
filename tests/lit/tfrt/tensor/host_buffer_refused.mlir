// RUN: bef_executor --host_allocator_type test_fixed_size_1k %s.bef 2>&1 | FileCheck %s

// tfrt_dht.allocate_buffer reports a refused allocation as TFRT's AllocateBuffer does.

// CHECK-LABEL: --- Running 'too_big'
func @too_big() {
  %size = tfrt.constant.i64 4096
  %align = tfrt.constant.i64 8
  // expected-error @+1 {{Cannot allocate host buffer}}
  %buf = tfrt_dht.allocate_buffer %size, %align
  tfrt.return
}
// CHECK-NOT: error
