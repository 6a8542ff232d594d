// RUN: bef_executor %s.bef | FileCheck %s

// CHECK-LABEL: --- Running 'basic'
func.func @basic() {
  %c0 = tfrt.new.chain
  %a = "tfrt_sht.create_tensor"() {shape = [2], values = ["string", "tensor"]} : () -> !t.tensor
  // CHECK-NEXT: StringHostTensor shape = [2], values = ["string", "tensor"]
  %c1 = tfrt_dht.print_tensor %a, %c0
  %b = "tfrt_sht.create_uninitialized_tensor"() {shape = [2]} : () -> !t.tensor
  // CHECK-NEXT: StringHostTensor shape = [2], values = ["", ""]
  %c2 = tfrt_dht.print_tensor %b, %c1
  tfrt.return
}
