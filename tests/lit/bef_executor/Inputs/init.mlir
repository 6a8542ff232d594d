func.func @print_bye() {
  %ch = tfrt.new.chain
  %x = tfrt.constant.i32 2
  %ch1 = tfrt.print.i32 %x, %ch
  tfrt.return
}

func.func @__init__() {
  %ch = tfrt.new.chain
  %x = tfrt.constant.i32 0
  %ch1 = tfrt.print.i32 %x, %ch
  tfrt.return
}

func.func @print_hello() {
  %ch = tfrt.new.chain
  %x = tfrt.constant.i32 1
  %ch1 = tfrt.print.i32 %x, %ch
  tfrt.return
}
