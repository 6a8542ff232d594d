// N-Queens as a tree of AsyncValue tasks (the playground's second experiment, current syntax).
//
// nqueens.i32(n, levels) enqueues one task per valid placement of 0..levels queens (11,167
// tasks for n = 14, levels = 4), solves each depth-`levels` subtree with the Numba
// backtracking solver, and sums the counts through AsyncValue callbacks (no thread blocks).
//
//   bef_executor --work_queue_type=mstd:2 examples/nqueens/nqueens.mlir
//   --- Running 'nqueen':
//   int32 = 365596

func.func @nqueen() {
  %ch0 = tfrt.new.chain
  %n = tfrt.constant.i32 14
  %levels = tfrt.constant.i32 4
  %count = "nqueens.i32"(%n, %levels) : (i32, i32) -> i32
  %ch1 = tfrt.print.i32 %count, %ch0
  tfrt.return
}
