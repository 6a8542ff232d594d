// RUN: bef_executor_lite %s.bef 2>&1 | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/bef_executor/basics.mlir: prints of every scalar
// type, division by zero, strings, calls, error results (sync/async/concrete/indirect), ignored
// errors, partial failure, cancellation, AsyncValue get/ref, logging, resources, shared context,
// multiple returns, nested array attributes, identity and multi_arg_result.

// CHECK-LABEL: --- Not running 'call_add.i32' because it has arguments
func.func @call_add.i32(%x: i32, %y: i32) -> i32 {
  %z = tfrt.add.i32 %x, %y
  tfrt.return %z : i32
}

// CHECK-LABEL: --- Running 'basic.i1'
func.func @basic.i1() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %t = tfrt.constant.i1 1
  %f = tfrt.constant.i1 0
  // CHECK-NEXT: int1 = 1
  %ch1 = tfrt.print.i1 %t, %ch0
  // CHECK-NEXT: int1 = 0
  %ch2 = tfrt.print.i1 %f, %ch1
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'basic.i32'
func.func @basic.i32() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %x = tfrt.constant.i32 42
  // CHECK-NEXT: int32 = 42
  %ch1 = tfrt.print.i32 %x, %ch0

  %y = tfrt.add.i32 %x, %x
  // CHECK-NEXT: int32 = 84
  %ch2 = tfrt.print.i32 %y, %ch1

  %z = tfrt.call @call_add.i32(%x, %y) : (i32, i32) -> i32
  // CHECK-NEXT: int32 = 126
  %ch3 = tfrt.print.i32 %z, %ch2

  %q, %r = tfrt.div.i32 %z, %x
  // CHECK-NEXT: int32 = 3
  %ch4 = tfrt.print.i32 %q, %ch3
  // CHECK-NEXT: int32 = 0
  %ch5 = tfrt.print.i32 %r, %ch4

  %m = tfrt.constant.i32 -7
  %q2, %r2 = tfrt.div.i32 %m, %q
  // CHECK-NEXT: int32 = -2
  %ch6 = tfrt.print.i32 %q2, %ch5
  // CHECK-NEXT: int32 = -1
  %ch7 = tfrt.print.i32 %r2, %ch6

  // CHECK-NEXT: 'basic.i32' returned !tfrt.chain value
  tfrt.return %ch7 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'basic.i64'
func.func @basic.i64() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %x = tfrt.constant.i64 42
  // CHECK-NEXT: int64 = 42
  %ch1 = tfrt.print.i64 %x, %ch0
  %y = tfrt.add.i64 %x, %x
  // CHECK-NEXT: int64 = 84
  %ch2 = tfrt.print.i64 %y, %ch1
  %big = tfrt.constant.i64 9223372036854775807
  // CHECK-NEXT: int64 = 9223372036854775807
  %ch3 = tfrt.print.i64 %big, %ch2
  tfrt.return %ch3 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'basic.f32'
func.func @basic.f32() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %x = tfrt.constant.f32 42.0
  // CHECK-NEXT: f32 = 42.000000
  %ch1 = tfrt.print.f32 %x, %ch0
  %y = tfrt.add.f32 %x, %x
  // CHECK-NEXT: f32 = 84.000000
  %ch2 = tfrt.print.f32 %y, %ch1
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'basic.f64'
func.func @basic.f64() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %x = tfrt.constant.f64 42.0
  // CHECK-NEXT: f64 = 42.000000
  %ch1 = tfrt.print.f64 %x, %ch0
  %y = tfrt.add.f64 %x, %x
  // CHECK-NEXT: f64 = 84.000000
  %ch2 = tfrt.print.f64 %y, %ch1
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'divide_by_zero.i32'
func.func @divide_by_zero.i32() -> i32 {
  %x = tfrt.constant.i32 42
  %zero = tfrt.constant.i32 0
  // expected-error @+1 {{runtime error: Divide by zero}}
  %q, %r = tfrt.div.i32 %x, %zero
  // CHECK-NEXT: 'divide_by_zero.i32' returned <<error: Divide by zero>>
  tfrt.return %q : i32
}

// CHECK-LABEL: --- Running 'basic_strings'
func.func @basic_strings() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %hello = "tfrt_test.get_string"() { value = "hello" } : () -> !tfrt.string
  %world = "tfrt_test.get_string"() { value = " world" } : () -> !tfrt.string
  // CHECK-NEXT: string = hello
  %ch1 = "tfrt_test.print_string"(%hello, %ch0) : (!tfrt.string, !tfrt.chain) -> !tfrt.chain
  %hw = "tfrt_test.append_string"(%hello, %world) : (!tfrt.string, !tfrt.string) -> !tfrt.string
  // CHECK-NEXT: string = hello world
  %ch2 = "tfrt_test.print_string"(%hw, %ch1) : (!tfrt.string, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'print_hello'
func.func @print_hello() {
  %ch0 = tfrt.new.chain
  // CHECK-NEXT: hello host executor!
  %ch1 = "tfrt_test.print_hello"(%ch0) : (!tfrt.chain) -> !tfrt.chain
  tfrt.return
}

// CHECK-LABEL: --- Running 'test_copy_with_delay'
func.func @test_copy_with_delay() -> (i32, i64) {
  %a = tfrt.constant.i32 1
  %b = tfrt.constant.i64 2
  %c = "tfrt_test.copy.with_delay.i32"(%a) : (i32) -> i32
  %d = "tfrt_test.copy.with_delay.i64"(%b) : (i64) -> i64
  // CHECK-NEXT: 'test_copy_with_delay' returned 1,2
  tfrt.return %c, %d : i32, i64
}

// CHECK-LABEL: --- Running 'test_count3'
func.func @test_count3() -> (i32, i32, i32) {
  %x = tfrt.constant.i32 41
  %a, %b, %c = tfrt_test.count3.i32 %x
  // CHECK-NEXT: 'test_count3' returned 42,43,44
  tfrt.return %a, %b, %c : i32, i32, i32
}

// CHECK-LABEL: --- Running 'test_error_result'
func.func @test_error_result() -> i32 {
  // expected-error @+1 {{runtime error: something bad happened}}
  %x = "tfrt_test.fail"() : () -> i32
  // CHECK-NEXT: 'test_error_result' returned <<error: something bad happened>>
  tfrt.return %x : i32
}

// CHECK-LABEL: --- Running 'test_error_result_propagated'
func.func @test_error_result_propagated() -> (i32, !tfrt.chain) {
  %ch0 = tfrt.new.chain
  // expected-error @+1 {{runtime error: something bad happened}}
  %x = "tfrt_test.fail"() : () -> i32
  %one = tfrt.constant.i32 1
  %y = tfrt.add.i32 %x, %one
  %ch1 = tfrt.print.i32 %y, %ch0
  // CHECK-NEXT: 'test_error_result_propagated' returned <<error: something bad happened>>,<<error: something bad happened>>
  tfrt.return %y, %ch1 : i32, !tfrt.chain
}

// CHECK-LABEL: --- Running 'test_async_error_result'
func.func @test_async_error_result() -> i32 {
  // expected-error @+1 {{runtime error: something bad happened asynchronously}}
  %x = "tfrt_test.report_error_async"() : () -> i32
  // CHECK-NEXT: 'test_async_error_result' returned <<error: something bad happened asynchronously>>
  tfrt.return %x : i32
}

// CHECK-LABEL: --- Running 'test_concrete_async'
func.func @test_concrete_async() -> i32 {
  %zero = tfrt.constant.i32 0
  %x = "tfrt_test.report_error_concrete_async"(%zero) : (i32) -> i32
  // CHECK-NEXT: 'test_concrete_async' returned 0
  tfrt.return %x : i32
}

// CHECK-LABEL: --- Running 'test_concrete_async_error'
func.func @test_concrete_async_error() -> i32 {
  %one = tfrt.constant.i32 1
  // expected-error @+1 {{runtime error: something bad happened asynchronously}}
  %x = "tfrt_test.report_error_concrete_async"(%one) : (i32) -> i32
  // CHECK-NEXT: 'test_concrete_async_error' returned <<error: something bad happened asynchronously>>
  tfrt.return %x : i32
}

// CHECK-LABEL: --- Running 'test_indirect_async'
func.func @test_indirect_async() -> i32 {
  %zero = tfrt.constant.i32 0
  %x = "tfrt_test.report_error_indirect_async"(%zero) : (i32) -> i32
  // CHECK-NEXT: 'test_indirect_async' returned 0
  tfrt.return %x : i32
}

// CHECK-LABEL: --- Running 'test_indirect_async_error'
func.func @test_indirect_async_error() -> i32 {
  %one = tfrt.constant.i32 1
  // expected-error @+1 {{runtime error: something bad happened asynchronously}}
  %x = "tfrt_test.report_error_indirect_async"(%one) : (i32) -> i32
  // CHECK-NEXT: 'test_indirect_async_error' returned <<error: something bad happened asynchronously>>
  tfrt.return %x : i32
}

// An error whose value is never used only produces the diagnostic.
// CHECK-LABEL: --- Running 'test_ignored_error'
func.func @test_ignored_error() -> i32 {
  // expected-error @+1 {{runtime error: something bad happened}}
  %x = "tfrt_test.fail"() : () -> i32
  %y = tfrt.constant.i32 1
  // CHECK-NEXT: 'test_ignored_error' returned 1
  tfrt.return %y : i32
}

// CHECK-LABEL: --- Running 'test_partial_fail'
func.func @test_partial_fail() -> (i32, i32) {
  // expected-error @+1 {{runtime error: something bad happened}}
  %x, %y = "tfrt_test.partial_fail"() : () -> (i32, i32)
  // CHECK-NEXT: 'test_partial_fail' returned 1,<<error: something bad happened>>
  tfrt.return %x, %y : i32, i32
}

// CHECK-LABEL: --- Running 'test_cancel'
func.func @test_cancel() -> i32 {
  %ch0 = tfrt.new.chain
  %x, %ch1 = "tfrt_test.cancel"(%ch0) : (!tfrt.chain) -> (i32, !tfrt.chain)
  %one = tfrt.constant.i32 1
  %y = tfrt.add.i32 %x, %one
  // CHECK-NEXT: 'test_cancel' returned <<error: Cancelled>>
  tfrt.return %y : i32
}

// CHECK-LABEL: --- Running 'test_async_value_get'
func.func @test_async_value_get() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %s = "tfrt_test.async_value_get"() : () -> !tfrt.string
  // CHECK-NEXT: string = base1:base2:final_class:3
  %ch1 = "tfrt_test.print_string"(%s, %ch0) : (!tfrt.string, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'test_async_value_ref'
func.func @test_async_value_ref() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %s = "tfrt_test.async_value_ref"() : () -> !tfrt.string
  // CHECK-NEXT: string = available:2;unavailable;(3);available:3;unavailable;available:4
  %ch1 = "tfrt_test.print_string"(%s, %ch0) : (!tfrt.string, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'test_logging'
func.func @test_logging() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %s = "tfrt_test.get_string"() { value = "logging test" } : () -> !tfrt.string
  // CHECK-NEXT: from TFRT_LOG(INFO): logging test
  // CHECK-NEXT: from TFRT_LOG(WARNING): logging test
  // CHECK-NEXT: from TFRT_LOG(ERROR): logging test
  // CHECK-NEXT: from TFRT_LOG_IF(INFO, true): logging test
  // CHECK-NEXT: from TFRT_LOG_IF(WARNING, true): logging test
  // CHECK-NEXT: from TFRT_LOG_IF(ERROR, true): logging test
  %ch1 = "tfrt_test.logging"(%s, %ch0) : (!tfrt.string, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'test_resource'
func.func @test_resource() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  // CHECK-NEXT: Allocated TestResource
  %r, %ch1 = "tfrt_test.allocate_resource"(%ch0) : (!tfrt.chain) -> (!tfrt.test.resource, !tfrt.chain)
  // CHECK-NEXT: Destroyed TestResource
  // CHECK-NEXT: tfrt_test.deallocate_resource done
  %ch2 = "tfrt_test.deallocate_resource"(%r, %ch1) : (!tfrt.test.resource, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: 'test_resource' returned !tfrt.chain value
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'test_resource_cancel'
func.func @test_resource_cancel() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  // CHECK-NEXT: Allocated TestResource
  %r, %ch1 = "tfrt_test.allocate_resource"(%ch0) : (!tfrt.chain) -> (!tfrt.test.resource, !tfrt.chain)
  %x, %ch2 = "tfrt_test.cancel"(%ch1) : (!tfrt.chain) -> (i32, !tfrt.chain)
  // The deallocation is skipped; the resource dies with its last reference.
  // CHECK-NEXT: Destroyed TestResource
  %ch3 = "tfrt_test.deallocate_resource"(%r, %ch2) : (!tfrt.test.resource, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: 'test_resource_cancel' returned <<error: Cancelled>>
  tfrt.return %ch3 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'test_shared_context'
func.func @test_shared_context() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %n, %ch1 = "tfrt_test.use_sample_shared_context"(%ch0) : (!tfrt.chain) -> (!tfrt.string, !tfrt.chain)
  // CHECK-NEXT: string = sample_shared_context0
  %ch2 = "tfrt_test.print_string"(%n, %ch1) : (!tfrt.string, !tfrt.chain) -> !tfrt.chain
  %n2, %ch3 = "tfrt_test.use_sample_shared_context"(%ch2) : (!tfrt.chain) -> (!tfrt.string, !tfrt.chain)
  // CHECK-NEXT: string = sample_shared_context0
  %ch4 = "tfrt_test.print_string"(%n2, %ch3) : (!tfrt.string, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch4 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'return_multi'
func.func @return_multi() -> (i32, i32, i64, f32, f64) {
  %a = tfrt.constant.i32 1
  %b = tfrt.constant.i32 -1
  %c = tfrt.constant.i64 1
  %d = tfrt.constant.f32 1.0
  %e = tfrt.constant.f64 -1.5
  // CHECK-NEXT: 'return_multi' returned 1,-1,1,1.000000e+00,-1.500000e+00
  tfrt.return %a, %b, %c, %d, %e : i32, i32, i64, f32, f64
}

// CHECK-LABEL: --- Running 'return_same_value_twice'
func.func @return_same_value_twice() -> (i32, i32) {
  %a = tfrt.constant.i32 7
  // CHECK-NEXT: 'return_same_value_twice' returned 7,7
  tfrt.return %a, %a : i32, i32
}

// CHECK-LABEL: --- Running 'test_nested_array_attr'
func.func @test_nested_array_attr() -> (!tfrt.string, i32, i32, f32) {
  %s, %a, %b, %c = "tfrt_test.flat"() { value = [["string", [1 : i32, 0 : i32]], [1.0 : f32]] } : () -> (!tfrt.string, i32, i32, f32)
  // CHECK-NEXT: 'test_nested_array_attr' returned !tfrt.string value,1,0,1.000000e+00
  tfrt.return %s, %a, %b, %c : !tfrt.string, i32, i32, f32
}

// CHECK-LABEL: --- Running 'test_identity'
func.func @test_identity() -> i32 {
  %ch0 = tfrt.new.chain
  %x = tfrt.constant.i32 5
  %y = "tfrt_test.identity"(%ch0, %x) : (!tfrt.chain, i32) -> (i32)
  // CHECK-NEXT: 'test_identity' returned 5
  tfrt.return %y : i32
}

// CHECK-LABEL: --- Running 'test_multi_arg_result'
func.func @test_multi_arg_result() -> (i32, i32, i32) {
  %a = tfrt.constant.i32 1
  %b = tfrt.constant.i32 2
  %c = tfrt.constant.i32 3
  %x, %y, %z = "tfrt_test.multi_arg_result"(%a, %b, %c) : (i32, i32, i32) -> (i32, i32, i32)
  // CHECK-NEXT: 'test_multi_arg_result' returned 1,2,3
  tfrt.return %x, %y, %z : i32, i32, i32
}
