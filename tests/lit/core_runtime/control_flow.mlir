// RUN: bef_executor --test_init_function=register_op_handlers_cpu %s.bef | FileCheck %s
// RUN: bef_executor --test_init_function=register_op_handlers_cpu %s | FileCheck %s

func.func @register_op_handlers_cpu() {
  %null = "corert.create_null_op_handler"() : () -> !corert.ophandler
  %cpu = "corert.create_cpu_op_handler"(%null) : (!corert.ophandler) -> !corert.ophandler
  corert.register_op_handler %cpu "cpu"
  tfrt.return
}

func.func @cond_true(%ch: !tfrt.chain, %x: !corert.tensorhandle) -> (!tfrt.chain, !corert.tensorhandle) {
  %cpu = corert.get_op_handler %ch "cpu"
  %y = corert.executeop(%cpu) "tfrt_test.add"(%x, %x) : 1
  tfrt.return %ch, %y : !tfrt.chain, !corert.tensorhandle
}

func.func @cond_false(%ch: !tfrt.chain, %x: !corert.tensorhandle) -> (!tfrt.chain, !corert.tensorhandle) {
  tfrt.return %ch, %x : !tfrt.chain, !corert.tensorhandle
}

// CHECK-LABEL: --- Running 'cond_on_tensorhandle'
func.func @cond_on_tensorhandle() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %cpu = corert.get_op_handler %ch0 "cpu"
  %p = corert.executeop(%cpu) "tfrt_test.create_dense_tensor"() { shape = [1], values = [1 : i1] } : 1
  %x = corert.executeop(%cpu) "tfrt_test.create_dense_tensor"() { shape = [2], values = [3 : i32] } : 1
  %ch1, %r = corert.cond %p @cond_true @cond_false (%ch0, %x) : (!corert.tensorhandle) -> (!corert.tensorhandle)
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [2], values = [6, 6]
  %ch2 = "corert.print_tensorhandle"(%r, %ch1) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  %s = corert.const_string_tensor {shape = [1], value = [""]}
  %ch3, %r2 = corert.cond %s @cond_true @cond_false (%ch2, %x) : (!corert.tensorhandle) -> (!corert.tensorhandle)
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [2], values = [3, 3]
  %ch4 = "corert.print_tensorhandle"(%r2, %ch3) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch4 : !tfrt.chain
}

func.func @while_cond(%ch: !tfrt.chain, %x: !corert.tensorhandle) -> (!tfrt.chain, !corert.tensorhandle) {
  %cpu = corert.get_op_handler %ch "cpu"
  %limit = corert.executeop(%cpu) "tfrt_test.create_dense_tensor"() { shape = [], values = [16 : i32] } : 1
  %m = corert.executeop(%cpu) "tfrt_test.minimum"(%x, %limit) : 1
  %eq = corert.executeop(%cpu) "tfrt_test.equal"(%m, %x) : 1
  %ne = corert.executeop(%cpu) "tfrt_test.subtract"(%limit, %m) : 1
  tfrt.return %ch, %ne : !tfrt.chain, !corert.tensorhandle
}

func.func @while_body(%ch: !tfrt.chain, %x: !corert.tensorhandle) -> (!tfrt.chain, !corert.tensorhandle) {
  %cpu = corert.get_op_handler %ch "cpu"
  %y = corert.executeop(%cpu) "tfrt_test.add"(%x, %x) : 1
  tfrt.return %ch, %y : !tfrt.chain, !corert.tensorhandle
}

// CHECK-LABEL: --- Running 'while_doubles_until_16'
func.func @while_doubles_until_16() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %cpu = corert.get_op_handler %ch0 "cpu"
  %x = corert.executeop(%cpu) "tfrt_test.create_dense_tensor"() { shape = [], values = [1 : i32] } : 1
  %ch1, %r = corert.while @while_cond @while_body (%ch0, %x) : (!corert.tensorhandle) -> (!corert.tensorhandle)
  // CHECK-NEXT: DenseHostTensor dtype = i32, shape = [], values = [16]
  %ch2 = "corert.print_tensorhandle"(%r, %ch1) : (!corert.tensorhandle, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch2 : !tfrt.chain
}
