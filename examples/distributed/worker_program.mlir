// The program every worker runs: one step of a toy computation, y = 2 * x.
func.func @scale(%x: !t.tensor) -> (!tfrt.chain, !t.tensor) {
  %ch0 = tfrt.new.chain
  %ch1 = "tfrt_test.add_inplace.f32"(%x, %x, %ch0) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1, %x : !tfrt.chain, !t.tensor
}
