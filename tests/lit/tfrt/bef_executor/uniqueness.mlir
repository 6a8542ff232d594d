// RUN: bef_executor_lite %s.bef | FileCheck %s --dump-input=fail
// RUN: bef_executor_lite -work_queue_type=mstd %s.bef | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_executor/uniqueness.mlir: IsUnique()
// is false for a value shared by several users and for values produced through tfrt.call
// (indirect results) or make_indirect.

// CHECK-LABEL: --- Not running 'return_arg' because it has arguments
func.func @return_arg(%x: i32) -> i32 {
  tfrt.return %x : i32
}

// CHECK-LABEL: --- Running 'unique_and_shared'
func.func @unique_and_shared() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = tfrt.constant.i32 1
  %u = "tfrt_test.get_uniqueness"(%a) : (i32) -> (i1)
  // CHECK-NEXT: true
  %ch1 = "tfrt_test.print_bool"(%ch0, %u) : (!tfrt.chain, i1) -> !tfrt.chain

  %b = tfrt.constant.i32 2
  %s = "tfrt_test.get_uniqueness"(%b) : (i32) -> (i1)
  %ch2 = tfrt.print.i32 %b, %ch1
  // CHECK-NEXT: int32 = 2
  // CHECK-NEXT: false
  %ch3 = "tfrt_test.print_bool"(%ch2, %s) : (!tfrt.chain, i1) -> !tfrt.chain
  tfrt.return %ch3 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'indirect_not_unique'
func.func @indirect_not_unique() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = tfrt.constant.i32 1
  %b = tfrt.call @return_arg(%a) : (i32) -> i32
  %u = "tfrt_test.get_uniqueness"(%b) : (i32) -> (i1)
  // CHECK-NEXT: false
  %ch1 = "tfrt_test.print_bool"(%ch0, %u) : (!tfrt.chain, i1) -> !tfrt.chain

  %c = tfrt.constant.i32 3
  %d = "tfrt_test.make_indirect"(%c) : (i32) -> (i32)
  %v = "tfrt_test.get_uniqueness"(%d) : (i32) -> (i1)
  // CHECK-NEXT: false
  %ch2 = "tfrt_test.print_bool"(%ch1, %v) : (!tfrt.chain, i1) -> !tfrt.chain
  tfrt.return %ch2 : !tfrt.chain
}
