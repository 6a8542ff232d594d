// RUN: bef_executor %s.bef 2>&1 | FileCheck %s

// Shapes (docs/conformance.md): build, print, compare, partial and fixed-rank shapes, and the errors of
// ts.to_shape (matched expected-errors print nothing).

// CHECK-LABEL: --- Running 'basic_shape'
func.func @basic_shape() {
  %ch0 = tfrt.new.chain
  %a = ts.build_shape [1 : i64, 57 : i64, 92 : i64]
  // CHECK-NEXT: shape = [1, 57, 92]
  %ch1 = ts.print_shape %a, %ch0
  %b = ts.build_shape []
  // CHECK-NEXT: shape = []
  %ch2 = ts.print_shape %b, %ch1
  %c = ts.build_shape [4294967295 : i64, 65536 : i64, 0 : i64, 1 : i64, 2 : i64, 3 : i64, 4 : i64, 5 : i64]
  // CHECK-NEXT: shape = [4294967295, 65536, 0, 1, 2, 3, 4, 5]
  %ch3 = ts.print_shape %c, %ch2
  %n = ts.get_num_elements %a
  // CHECK-NEXT: int64 = 5244
  %ch4 = tfrt.print.i64 %n, %ch3
  %e = ts.equal_shape %a, %a
  // CHECK-NEXT: int1 = 1
  %ch5 = tfrt.print.i1 %e, %ch4
  %ne = ts.equal_shape %a, %b
  // CHECK-NEXT: int1 = 0
  %ch6 = tfrt.print.i1 %ne, %ch5
  tfrt.return
}

// CHECK-LABEL: --- Running 'fixed_rank_shape'
func.func @fixed_rank_shape() {
  %ch0 = tfrt.new.chain
  %a = ts.build_shape [1 : i64, 57 : i64, 92 : i64]
  %b = ts.as_fixed_rank_shape.3 %a
  // CHECK-NEXT: fixed_rank_shape = [1, 57, 92]
  %ch1 = ts.print_fixed_rank_shape.3 %b, %ch0
  %z = ts.build_shape [1 : i64, 0 : i64, 2 : i64]
  %zf = ts.as_fixed_rank_shape.3 %z
  // CHECK-NEXT: fixed_rank_shape = []
  %ch2 = ts.print_fixed_rank_shape.3 %zf, %ch1
  tfrt.return
}

// CHECK-LABEL: --- Running 'partial_shapes'
func.func @partial_shapes() {
  %ch0 = tfrt.new.chain
  %a = ts.build_partial_shape [1 : i64, 57 : i64, 92 : i64]
  // CHECK-NEXT: partial_tensor_shape = [1, 57, 92]
  %ch1 = ts.print_partial_shape %a, %ch0
  %b = ts.to_shape %a
  // CHECK-NEXT: shape = [1, 57, 92]
  %ch2 = ts.print_shape %b, %ch1
  %u = ts.build_unranked_partial_shape
  // CHECK-NEXT: partial_tensor_shape = Unknown rank
  %ch3 = ts.print_partial_shape %u, %ch2
  %p = ts.to_partial_shape %b
  // CHECK-NEXT: partial_tensor_shape = [1, 57, 92]
  %ch4 = ts.print_partial_shape %p, %ch3
  tfrt.return
}

// CHECK-LABEL: --- Running 'to_shape_errors'
func.func @to_shape_errors() {
  %ch0 = tfrt.new.chain
  %a = ts.build_partial_shape [-1 : i64, 57 : i64, -1 : i64]
  // CHECK-NEXT: partial_tensor_shape = [-1, 57, -1]
  %ch1 = ts.print_partial_shape %a, %ch0
  // expected-error @+1 {{runtime error: Unknown dimensions at following indices = [0, 2]}}
  %b = ts.to_shape %a
  %u = ts.build_unranked_partial_shape
  // expected-error @+1 {{runtime error: Unknown rank}}
  %c = ts.to_shape %u
  tfrt.return
}
// CHECK-NOT: error
