// RUN: bef_executor %s.bef 2>&1 | FileCheck %s

// CHECK-LABEL: --- Running 'logging'
func.func @logging() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %null = "corert.create_null_op_handler"() : () -> !corert.ophandler
  %cpu = "corert.create_cpu_op_handler"(%null) : (!corert.ophandler) -> !corert.ophandler
  %log = "corert.create_logging_op_handler"(%cpu) {sync_log_results = 1 : i32} : (!corert.ophandler) -> !corert.ophandler
  %a = corert.executeop(%log) "tfrt_test.create_dense_tensor"()
    { shape = [5], values = [1 : i32, 2 : i32, 3 : i32, 4 : i32, 5 : i32] } : 1
  // CHECK-NEXT: [0] dispatch 'tfrt_test.create_dense_tensor' 0 arguments, 1 result, OpAttrs contains 2 entries:
  // CHECK-NEXT:   'shape' type=I64 value=[5]
  // CHECK-NEXT:   'values' type=I32 value=[1, 2, 3, 4, 5]
  // CHECK-EMPTY:
  // CHECK-NEXT: Inputs for [0]: 'tfrt_test.create_dense_tensor':
  // CHECK-EMPTY:
  // CHECK-NEXT: Outputs for [0]: 'tfrt_test.create_dense_tensor':
  // CHECK-NEXT:   Output for [0] tensor 0: DenseHostTensor dtype = i32, shape = [5], values = [1, 2, 3, 4, 5]
  %b = corert.executeop(%log) "tfrt_test.odd_collector"(%a) : 1
  // CHECK: [1] dispatch 'tfrt_test.odd_collector' 1 argument, 1 result, no attributes
  // CHECK-NEXT: Inputs for [1]: 'tfrt_test.odd_collector':
  // CHECK-NEXT:   Input for [1] tensor 0: DenseHostTensor dtype = i32, shape = [5], values = [1, 2, 3, 4, 5]
  // CHECK-EMPTY:
  // CHECK-NEXT: Outputs for [1]: 'tfrt_test.odd_collector':
  // CHECK-NEXT:   Output for [1] tensor 0: DenseHostTensor dtype = i32, shape = [3], values = [1, 3, 5]
  // CHECK: DenseHostTensor dtype = i32, shape = [3], values = [1, 3, 5]
  %ch1 = "corert.print_tensorhandle"(%b, %ch0) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1 : !tfrt.chain
}
