// N-Queens as a tree of AsyncValue tasks, in the 2020 syntax of the original playground
// (`func`, `hex.*`).  Same program as nqueens.mlir; see that file and README.md.
//
//   bef_executor --work_queue_type=mstd:2 examples/nqueens/nqueens_2020.mlir
//   --- Running 'nqueen':
//   int32 = 365596

func @nqueen() {
  %ch0 = hex.new.chain
  %n = hex.constant.i32 14
  %levels = hex.constant.i32 4
  %count = "nqueens.i32"(%n, %levels) : (i32, i32) -> i32
  %ch1 = hex.print.i32 %count, %ch0
  hex.return
}
