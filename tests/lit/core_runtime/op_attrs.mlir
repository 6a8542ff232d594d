// RUN: bef_executor %s.bef | FileCheck %s

// CHECK-LABEL: --- Running 'op_attrs_empty'
func.func @op_attrs_empty() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = "corert.create_op_attrs"() : () -> !corert.opattrs
  // CHECK-NEXT: OpAttrs is empty
  %ch1 = "tfrt_test.corert.op_attrs_print"(%a, %ch0) : (!corert.opattrs, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'op_attrs_scalars'
func.func @op_attrs_scalars() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = "corert.create_op_attrs"() : () -> !corert.opattrs
  %ch1 = "corert.op_attrs_set.i32"(%a, %ch0) {key = "i", value = 42 : i32} : (!corert.opattrs, !tfrt.chain) -> !tfrt.chain
  %ch2 = "corert.op_attrs_set.f32"(%a, %ch1) {key = "f", value = 2.5 : f32} : (!corert.opattrs, !tfrt.chain) -> !tfrt.chain
  %ch3 = "corert.op_attrs_set.bool"(%a, %ch2) {key = "b", value = true} : (!corert.opattrs, !tfrt.chain) -> !tfrt.chain
  %ch4 = "corert.op_attrs_set.dtype"(%a, %ch3) {key = "t", value = f32} : (!corert.opattrs, !tfrt.chain) -> !tfrt.chain
  %ch5 = "corert.op_attrs_set_array.i32"(%a, %ch4) {key = "arr", value = [1 : i32, 2 : i32, 3 : i32, 4 : i32, 5 : i32, 6 : i32]} : (!corert.opattrs, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: OpAttrs contains 5 entries:
  // CHECK-NEXT:   'arr' type=I32 value=[1, 2, 3, 4, 5...]
  // CHECK-NEXT:   'b' type=BOOL value=1
  // CHECK-NEXT:   'f' type=F32 value=2.500000e+00
  // CHECK-NEXT:   'i' type=I32 value=42
  // CHECK-NEXT:   't' type=DTYPE value=F32
  // CHECK-EMPTY:
  %ch6 = "tfrt_test.corert.op_attrs_print"(%a, %ch5) : (!corert.opattrs, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch6 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'op_attrs_dense_shape_freeze'
func.func @op_attrs_dense_shape_freeze() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = "corert.create_op_attrs"() : () -> !corert.opattrs
  %ch1 = "corert.op_attrs_set.dense"(%a, %ch0) {key = "d", value = dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>} : (!corert.opattrs, !tfrt.chain) -> !tfrt.chain
  %ch2 = "corert.op_attrs_set.shape"(%a, %ch1) {key = "s", value = #corert.shape<1x?x3>} : (!corert.opattrs, !tfrt.chain) -> !tfrt.chain
  %ch3 = "corert.op_attrs_set.shape"(%a, %ch2) {key = "u", value = #corert.shape<*>} : (!corert.opattrs, !tfrt.chain) -> !tfrt.chain
  %ref, %ch4 = "tfrt_test.corert.op_attrs_freeze"(%a, %ch3) : (!corert.opattrs, !tfrt.chain) -> (!corert.opattrs_ref, !tfrt.chain)
  // CHECK-NEXT: OpAttrs contains 3 entries:
  // CHECK-NEXT:   'd' type=DENSE value=dtype=I32, rank=2, elt_count=4
  // CHECK-NEXT:   's' type=SHAPE value=<1x?x3>
  // CHECK-NEXT:   'u' type=SHAPE value=<*>
  %ch5 = "tfrt_test.corert.op_attrs_ref_print"(%ref, %ch4) : (!corert.opattrs_ref, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch5 : !tfrt.chain
}

// Freezing takes a snapshot: the map can still be extended, and each frozen copy keeps the
// entries it had when it was taken.
// CHECK-LABEL: --- Running 'op_attrs_freeze_then_extend'
func.func @op_attrs_freeze_then_extend() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = "corert.create_op_attrs"() : () -> !corert.opattrs
  %ch1 = "corert.op_attrs_set.i32"(%a, %ch0) {key = "x", value = 1 : i32} : (!corert.opattrs, !tfrt.chain) -> !tfrt.chain
  %first, %ch2 = "tfrt_test.corert.op_attrs_freeze"(%a, %ch1) : (!corert.opattrs, !tfrt.chain) -> (!corert.opattrs_ref, !tfrt.chain)
  %ch3 = "corert.op_attrs_set.f32"(%a, %ch2) {key = "y", value = 2.5 : f32} : (!corert.opattrs, !tfrt.chain) -> !tfrt.chain
  %second, %ch4 = "tfrt_test.corert.op_attrs_freeze"(%a, %ch3) : (!corert.opattrs, !tfrt.chain) -> (!corert.opattrs_ref, !tfrt.chain)
  // CHECK-NEXT: OpAttrs contains 1 entries:
  // CHECK-NEXT:   'x' type=I32 value=1
  %ch5 = "tfrt_test.corert.op_attrs_ref_print"(%first, %ch4) : (!corert.opattrs_ref, !tfrt.chain) -> !tfrt.chain
  // CHECK: OpAttrs contains 2 entries:
  // CHECK-NEXT:   'x' type=I32 value=1
  // CHECK-NEXT:   'y' type=F32 value=2.500000e+00
  %ch6 = "tfrt_test.corert.op_attrs_ref_print"(%second, %ch5) : (!corert.opattrs_ref, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch6 : !tfrt.chain
}
