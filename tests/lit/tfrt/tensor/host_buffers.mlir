// RUN: bef_executor %s.bef 2>&1 | FileCheck %s
// RUN: tfrt_opt %s | tfrt_opt | FileCheck %s --check-prefix=OPT

// Host buffers as TFRT's tensor/mlir_tests/dense_host_tensor.mlir of its later revisions uses
// them: allocate_buffer takes the size and the alignment as operands, get_buffer_slice gives one
// buffer sharing the parent's bytes, make_tensor views a buffer as a tensor; dense<...>
// attributes become tensors through the tfrt_test.const_dense_attr kernels.

// OPT-LABEL: func.func @slices
// OPT: tfrt_dht.allocate_buffer %{{.*}}, %{{.*}}
// OPT: tfrt_dht.get_buffer_slice %{{.*}}, %{{.*}}, %{{.*}}
// OPT: tfrt_dht.make_tensor.i32 %{{.*}}, %{{.*}}, %{{.*}}

// CHECK-LABEL: --- Running 'slices'
func @slices() -> !tfrt.chain {
  %c0 = tfrt.new.chain
  %size = tfrt.constant.i64 24
  %align = tfrt.constant.i64 8
  %buf = tfrt_dht.allocate_buffer %size, %align
  %off = tfrt.constant.i64 8
  %n = tfrt.constant.i64 16
  %part = tfrt_dht.get_buffer_slice %buf, %off, %n
  %shape = ts.build_shape [2 : i64, 2 : i64]
  %t, %c1 = tfrt_dht.make_tensor.i32 %part, %shape, %c0
  %c2 = tfrt_dht.fill_tensor_with_constant.i32 %t, %c1 7 : i32
  // The whole buffer sees the slice's writes at byte 8 on.
  %shape6 = ts.build_shape [6 : i64]
  %whole, %c3 = tfrt_dht.make_tensor.i32 %buf, %shape6, %c2
  %c4 = tfrt_dht.fill_tensor_with_constant.i32 %whole, %c3 0 : i32
  %c5 = tfrt_dht.fill_tensor_with_constant.i32 %t, %c4 7 : i32
  %b2, %c6 = tfrt_dht.get_buffer %whole, %c5
  // CHECK-NEXT: HostBuffer<pointer={{0x[[:xdigit:]]+}}, size=24>
  %c7 = tfrt_dht.print_buffer %b2, %c6
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [6], values = [0, 0, 7, 7, 7, 7]
  %c8 = tfrt_dht.print_tensor %whole, %c7
  // CHECK-NEXT: 'slices' returned !tfrt.chain value
  tfrt.return %c8 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'bad_view'
func @bad_view() {
  %c0 = tfrt.new.chain
  %size = tfrt.constant.i64 8
  %align = tfrt.constant.i64 4
  %buf = tfrt_dht.allocate_buffer %size, %align
  %shape = ts.build_shape [3 : i64]
  // expected-error @+1 {{dht.make_tensor failed: buffer_size (8) is not equal to the number of elements in shape ([3]) times element size (4)}}
  %t, %c1 = tfrt_dht.make_tensor.i32 %buf, %shape, %c0
  tfrt.return
}

// CHECK-NEXT: --- Running 'dense_attrs'
func @dense_attrs() -> !tfrt.chain {
  %c0 = tfrt.new.chain
  %a = "tfrt_test.const_dense_attr"() {value = dense<[[1.5, 2.5], [3.5, 4.5]]> : tensor<2x2xf32>} : () -> !t.tensor
  // CHECK-NEXT: DenseHostTensor dtype = f32, shape = [2, 2], values = [1.500000e+00, 2.500000e+00, 3.500000e+00, 4.500000e+00]
  %c1 = tfrt_dht.print_tensor %a, %c0
  // A splat fills every element.
  %b = "tfrt_test.const_dense_attr"() {value = dense<3> : tensor<3xi64>} : () -> !t.tensor
  // CHECK-NEXT: DenseHostTensor dtype = i64, shape = [3], values = [3, 3, 3]
  %c2 = tfrt_dht.print_tensor %b, %c1
  tfrt.return %c2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'sync_dense_attr'
func @sync_dense_attr() attributes {tfrt.sync} {
  %a = "tfrt_test.sync.const_dense_attr"() {value = dense<[4, 5]> : tensor<2xi32>} : () -> !t.tensor
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [2], values = [4, 5]
  tfrt_dht_sync.print_tensor %a
  tfrt.return
}
