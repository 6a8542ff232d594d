// Input of expected_errors.test: one error without an annotation, one annotation without error.
func.func @unannotated() -> i32 {
  %x = "tfrt_test.fail"() : () -> i32
  tfrt.return %x : i32
}

func.func @never_fails() -> i32 {
  // expected-error @+1 {{runtime error: this is never reported}}
  %x = tfrt.constant.i32 3
  tfrt.return %x : i32
}
