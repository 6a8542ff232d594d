// Programs that never end on their own (bef_executor --timeout_seconds must end them).
func.func @repeat_forever() -> i32 {
  %zero = tfrt.constant.i32 0
  %n = tfrt.constant.i32 2147483647
  %r = tfrt.repeat.i32 %n, %zero : i32 {
    %one = tfrt.constant.i32 1
    %y = tfrt.add.i32 %zero, %one
    tfrt.return %y : i32
  }
  tfrt.return %r : i32
}

func.func private @forever_body(%ch: !tfrt.chain, %i: i32) -> (!tfrt.chain, i32, i1) {
  %one = tfrt.constant.i32 1
  %j = tfrt.add.i32 %i, %one
  %t = tfrt.constant.i1 1
  tfrt.return %ch, %j, %t : !tfrt.chain, i32, i1
}

func.func @while_forever() -> i32 {
  %ch0 = tfrt.new.chain
  %zero = tfrt.constant.i32 0
  %t = tfrt.constant.i1 1
  %r:2 = tfrt.while %t @forever_body(%ch0, %zero) parallel_iterations(1) : (!tfrt.chain, i32) -> (!tfrt.chain, i32)
  tfrt.return %r#1 : i32
}

func.func @while_parallel_forever() -> i32 {
  %ch0 = tfrt.new.chain
  %zero = tfrt.constant.i32 0
  %t = tfrt.constant.i1 1
  %r:2 = tfrt.while %t @forever_body(%ch0, %zero) parallel_iterations(4) : (!tfrt.chain, i32) -> (!tfrt.chain, i32)
  tfrt.return %r#1 : i32
}

func.func private @recurse(%x: i32) -> i32 {
  %r = tfrt.call @recurse(%x) : (i32) -> i32
  tfrt.return %r : i32
}

func.func @recursion() -> i32 {
  %one = tfrt.constant.i32 1
  %r = tfrt.call @recurse(%one) : (i32) -> i32
  tfrt.return %r : i32
}
