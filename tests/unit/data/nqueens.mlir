// The playground's N-Queens program in its 2020 syntax (docs/nqueens.md).
func @nqueen() {
  %ch = hex.new.chain
  %n = hex.constant.i32 14
  %l = hex.constant.i32 4
  %s = "nqueens.i32"(%n, %l) : (i32, i32) -> i32
  hex.print.i32 %s, %ch
  hex.return
}
