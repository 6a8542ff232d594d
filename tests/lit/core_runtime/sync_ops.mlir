// RUN: bef_executor --test_init_function=setup %s | FileCheck %s
// RUN: tfrt_opt %s | tfrt_opt | FileCheck %s --check-prefix=OPT

// Core-runtime ops inside a tfrt.sync function (corert_sync.*), and corert.executeop with no
// tensor results (the ": N" suffix left out).

func.func @setup() {
  %null = "corert.create_null_op_handler"() : () -> !corert.ophandler
  %cpu = "corert.create_cpu_op_handler"(%null) : (!corert.ophandler) -> !corert.ophandler
  corert.register_op_handler %cpu "cpu"
  tfrt.return
}

// CHECK-LABEL: --- Running 'scale_sync':
// CHECK-NEXT: DenseHostTensor dtype = f32, shape = [1, 2], values = [6.000000e+00, 9.000000e+00]
// OPT-LABEL: func.func @scale_sync()
// OPT: corert_sync.get_op_handler "cpu"
// OPT: corert_sync.executeop({{%.*}}) "tfrt_test.create_dense_tensor"() {shape = [1, 2], values = [2.000000e+00 : f32, 3.000000e+00 : f32]} : 1
func.func @scale_sync() attributes {tfrt.sync} {
  %cpu = corert_sync.get_op_handler "cpu"
  %a = corert_sync.executeop(%cpu)
    "tfrt_test.create_dense_tensor"() { shape = [1, 2], values = [2.0 : f32, 3.0 : f32] } : 1
  %b = corert_sync.executeop(%cpu)
    "tfrt_test.create_dense_tensor"() { shape = [1, 2], values = [3.0 : f32] } : 1
  %c = corert_sync.executeop(%cpu) "tfrt_test.multiply"(%a, %b) : 1
  "corert_sync.print_tensorhandle"(%c) : (!corert.tensorhandle) -> ()
  tfrt.return
}

// CHECK-LABEL: --- Running 'print_without_results':
// CHECK-NEXT: DenseHostTensor dtype = i32, shape = [2], values = [7, 7]
// OPT-LABEL: func.func @print_without_results()
// OPT: corert.executeop({{%.*}}) "tfrt_test.print"({{%.*}}){{$}}
func.func @print_without_results() -> !tfrt.chain {
  %ch = tfrt.new.chain
  %cpu = corert.get_op_handler %ch "cpu"
  %a = corert.executeop(%cpu)
    "tfrt_test.create_dense_tensor"() { shape = [2], values = [7 : i32] } : 1
  corert.executeop(%cpu) "tfrt_test.print"(%a)
  tfrt.return %ch : !tfrt.chain
}

// corert.executeop.seq prints its out chain and its tensors as separate values.
// CHECK-LABEL: --- Running 'seq_results':
// CHECK-NEXT: DenseHostTensor dtype = i32, shape = [1], values = [5]
// OPT-LABEL: func.func @seq_results()
// OPT: %[[CH:[0-9]+]], %[[T:[0-9]+]] = corert.executeop.seq({{%[0-9]+}}, {{%[0-9]+}}) "tfrt_test.create_dense_tensor"() {shape = [1], values = [5 : i32]} : 1
// OPT-NEXT: "corert.print_tensorhandle"(%[[T]], %[[CH]])
func.func @seq_results() -> !tfrt.chain {
  %ch = tfrt.new.chain
  %cpu = corert.get_op_handler %ch "cpu"
  %ch1, %t = corert.executeop.seq(%cpu, %ch) "tfrt_test.create_dense_tensor"() { shape = [1], values = [5 : i32] } : 1
  %ch2 = "corert.print_tensorhandle"(%t, %ch1) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch2 : !tfrt.chain
}
