// The smallest useful program: a constant and a print, `tfrt.*` kernels only (no tensors, so
// no NumPy and no Numba). Run: bef_executor examples/trivial/trivial.mlir
// benchmarks/startup.py times its start-up (.mlir, and .bef via tfrt_translate);
// tests/unit/test_startup_imports.py checks what running it imports.
func.func @main() {
  %ch0 = tfrt.new.chain
  %x = tfrt.constant.i32 42
  %ch1 = tfrt.print.i32 %x, %ch0
  tfrt.return
}
