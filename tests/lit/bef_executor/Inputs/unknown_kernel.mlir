func.func @uses_unknown() -> i32 {
  %x = tfrt.constant.i32 1
  // expected-error @+1 {{runtime error: unknown kernel name 'tfrt_test.no_such_kernel'}}
  %y = "tfrt_test.no_such_kernel"(%x) : (i32) -> i32
  tfrt.return %y : i32
}
