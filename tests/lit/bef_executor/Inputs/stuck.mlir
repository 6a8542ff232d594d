// Programs for robustness.test: kernels from tests/robustness/robust_harness.py that never
// finish (robust.never.i32) or whose helper thread dies first (robust.dies.i32).

func.func @stuck() -> (i32, i32) {
  %one = tfrt.constant.i32 1
  %x = "robust.never.i32"(%one) : (i32) -> i32
  %y = tfrt.add.i32 %x, %one
  %seven = tfrt.constant.i32 7
  tfrt.return %y, %seven : i32, i32
}

func.func @dies() -> i32 {
  %one = tfrt.constant.i32 1
  %x = "robust.dies.i32"(%one) : (i32) -> i32
  tfrt.return %x : i32
}

func.func @after() -> i32 {
  %one = tfrt.constant.i32 1
  %two = tfrt.add.i32 %one, %one
  tfrt.return %two : i32
}
