// RUN: bef_executor %s.bef 2>&1 | FileCheck %s --dump-input=fail
// RUN: tfrt_opt %s | tfrt_opt

// Reconstruction of TFRT's mlir_tests/tensor/tensor_shape.mlir: shapes, partial
// shapes, fixed-rank shapes, representation edge cases and the errors of ts.to_shape.

// CHECK-LABEL: --- Running 'build_shape'
func.func @build_shape() {
  %ch0 = tfrt.new.chain
  %a = ts.build_shape [1 : i64, 57 : i64, 92 : i64]
  // CHECK-NEXT: shape = [1, 57, 92]
  %ch1 = ts.print_shape %a, %ch0
  tfrt.return
}

// CHECK-LABEL: --- Running 'scalar_shape'
func.func @scalar_shape() {
  %ch0 = tfrt.new.chain
  %a = ts.build_shape []
  // CHECK-NEXT: shape = []
  %ch1 = ts.print_shape %a, %ch0
  %n = ts.get_num_elements %a
  // CHECK-NEXT: int64 = 1
  %ch2 = tfrt.print.i64 %n, %ch1
  tfrt.return
}

// CHECK-LABEL: --- Running 'equal_shape'
func.func @equal_shape() {
  %ch0 = tfrt.new.chain
  %a = ts.build_shape [1 : i64, 57 : i64, 92 : i64]
  %b = ts.build_shape [1 : i64, 57 : i64, 92 : i64]
  %c = ts.build_shape [1 : i64, 57 : i64]
  %ab = ts.equal_shape %a, %b
  // CHECK-NEXT: int1 = 1
  %ch1 = tfrt.print.i1 %ab, %ch0
  %ac = ts.equal_shape %a, %c
  // CHECK-NEXT: int1 = 0
  %ch2 = tfrt.print.i1 %ac, %ch1
  tfrt.return
}

// CHECK-LABEL: --- Running 'get_num_elements'
func.func @get_num_elements() {
  %ch0 = tfrt.new.chain
  %a = ts.build_shape [1 : i64, 57 : i64, 92 : i64]
  %n = ts.get_num_elements %a
  // CHECK-NEXT: int64 = 5244
  %ch1 = tfrt.print.i64 %n, %ch0
  tfrt.return
}

// CHECK-LABEL: --- Running 'representation_edge_cases'
func.func @representation_edge_cases() {
  %ch0 = tfrt.new.chain
  // Rank <= 7 with 16-bit dimensions.
  %a = ts.build_shape [65535 : i64, 1 : i64, 2 : i64, 3 : i64, 4 : i64, 5 : i64, 6 : i64]
  // CHECK-NEXT: shape = [65535, 1, 2, 3, 4, 5, 6]
  %ch1 = ts.print_shape %a, %ch0
  // Rank <= 4 with 32-bit dimensions.
  %b = ts.build_shape [4294967295 : i64, 65536 : i64, 1 : i64, 2 : i64]
  // CHECK-NEXT: shape = [4294967295, 65536, 1, 2]
  %ch2 = ts.print_shape %b, %ch1
  // Everything else needs the external representation.
  %c = ts.build_shape [65536 : i64, 1 : i64, 2 : i64, 3 : i64, 4 : i64]
  // CHECK-NEXT: shape = [65536, 1, 2, 3, 4]
  %ch3 = ts.print_shape %c, %ch2
  %d = ts.build_shape [4294967296 : i64]
  // CHECK-NEXT: shape = [4294967296]
  %ch4 = ts.print_shape %d, %ch3
  %e = ts.build_shape [1 : i64, 2 : i64, 3 : i64, 4 : i64, 5 : i64, 6 : i64, 7 : i64, 8 : i64]
  // CHECK-NEXT: shape = [1, 2, 3, 4, 5, 6, 7, 8]
  %ch5 = ts.print_shape %e, %ch4
  tfrt.return
}

// CHECK-LABEL: --- Running 'fixed_rank_shape'
func.func @fixed_rank_shape() {
  %ch0 = tfrt.new.chain
  %a = ts.build_shape [1 : i64, 57 : i64, 92 : i64]
  %b = ts.as_fixed_rank_shape.3 %a
  // CHECK-NEXT: fixed_rank_shape = [1, 57, 92]
  %ch1 = ts.print_fixed_rank_shape.3 %b, %ch0
  %c = ts.build_shape [7 : i64]
  %d = ts.as_fixed_rank_shape.1 %c
  // CHECK-NEXT: fixed_rank_shape = [7]
  %ch2 = ts.print_fixed_rank_shape.1 %d, %ch1
  %e = ts.build_shape [2 : i64, 3 : i64]
  %f = ts.as_fixed_rank_shape.2 %e
  // CHECK-NEXT: fixed_rank_shape = [2, 3]
  %ch3 = ts.print_fixed_rank_shape.2 %f, %ch2
  tfrt.return
}

// CHECK-LABEL: --- Running 'fixed_rank_shape_zero_elements'
func.func @fixed_rank_shape_zero_elements() {
  %ch0 = tfrt.new.chain
  %a = ts.build_shape [1 : i64, 0 : i64, 2 : i64]
  %b = ts.as_fixed_rank_shape.3 %a
  // Quirk: printed as [] whenever the element count is 0.
  // CHECK-NEXT: fixed_rank_shape = []
  %ch1 = ts.print_fixed_rank_shape.3 %b, %ch0
  tfrt.return
}

// CHECK-LABEL: --- Running 'partial_shape'
func.func @partial_shape() {
  %ch0 = tfrt.new.chain
  %a = ts.build_partial_shape [-1 : i64, 57 : i64, 92 : i64]
  // CHECK-NEXT: partial_tensor_shape = [-1, 57, 92]
  %ch1 = ts.print_partial_shape %a, %ch0
  %b = ts.build_unranked_partial_shape
  // CHECK-NEXT: partial_tensor_shape = Unknown rank
  %ch2 = ts.print_partial_shape %b, %ch1
  %c = ts.build_partial_shape [1 : i64, 57 : i64, 92 : i64]
  %d = ts.to_shape %c
  // CHECK-NEXT: shape = [1, 57, 92]
  %ch3 = ts.print_shape %d, %ch2
  %e = ts.to_partial_shape %d
  // CHECK-NEXT: partial_tensor_shape = [1, 57, 92]
  %ch4 = ts.print_partial_shape %e, %ch3
  tfrt.return
}

// CHECK-LABEL: --- Running 'to_shape_unknown_dims'
func.func @to_shape_unknown_dims() -> !ts.shape {
  %a = ts.build_partial_shape [-1 : i64, 57 : i64, -1 : i64]
  // expected-error @+1 {{runtime error: Unknown dimensions at following indices = [0, 2]}}
  %b = ts.to_shape %a
  // CHECK-NEXT: 'to_shape_unknown_dims' returned <<error: Unknown dimensions at following indices = [0, 2]>>
  tfrt.return %b : !ts.shape
}

// CHECK-LABEL: --- Running 'to_shape_unknown_rank'
func.func @to_shape_unknown_rank() -> !ts.shape {
  %a = ts.build_unranked_partial_shape
  // expected-error @+1 {{runtime error: Unknown rank}}
  %b = ts.to_shape %a
  // CHECK-NEXT: 'to_shape_unknown_rank' returned <<error: Unknown rank>>
  tfrt.return %b : !ts.shape
}

// CHECK-LABEL: --- Running 'get_dimension_and_identity'
func.func @get_dimension_and_identity() {
  %ch0 = tfrt.new.chain
  %a = ts.build_shape [1 : i64, 57 : i64, 92 : i64]
  %i = tfrt.constant.i32 1
  %d = ts.get_dimension %a, %i
  // CHECK-NEXT: int64 = 57
  %ch1 = tfrt.print.i64 %d, %ch0
  %b = "tfrt_test.identity"(%ch1, %a) : (!tfrt.chain, !ts.shape) -> (!ts.shape)
  // CHECK-NEXT: shape = [1, 57, 92]
  %ch2 = ts.print_shape %b, %ch1
  tfrt.return
}
