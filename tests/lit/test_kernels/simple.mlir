// Simple test kernels: strings, nested attributes, AsyncValue probes, aliasing, resources,
// shared contexts, logging and costs (docs/conformance.md).
// RUN: bef_executor %s.bef 2>&1 | FileCheck %s

// CHECK-LABEL: --- Running 'strings'
func.func @strings() -> !tfrt.string {
  %ch0 = tfrt.new.chain
  %a = "tfrt_test.get_string"() {value = "hello "} : () -> !tfrt.string
  %b = "tfrt_test.get_string"() {value = "world"} : () -> !tfrt.string
  %c = "tfrt_test.append_string"(%a, %b) : (!tfrt.string, !tfrt.string) -> !tfrt.string
  // CHECK-NEXT: string = hello world
  %ch1 = "tfrt_test.print_string"(%c, %ch0) : (!tfrt.string, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: hello host executor!
  %ch2 = "tfrt_test.print_hello"(%ch1) : (!tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: 'strings' returned !tfrt.string value
  tfrt.return %c : !tfrt.string
}

// CHECK-LABEL: --- Running 'flat'
func.func @flat() -> (i32, i32, f32, !tfrt.chain) {
  %s, %a, %b, %f = "tfrt_test.flat"() {value = [["string", [7 : i32, 9 : i32]], [2.5 : f32]]} : () -> (!tfrt.string, i32, i32, f32)
  %ch0 = tfrt.new.chain
  // CHECK-NEXT: string = string
  %ch1 = "tfrt_test.print_string"(%s, %ch0) : (!tfrt.string, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: 'flat' returned 7,9,2.500000e+00,!tfrt.chain value
  tfrt.return %a, %b, %f, %ch1 : i32, i32, f32, !tfrt.chain
}

// CHECK-LABEL: --- Running 'async_value_probes'
func.func @async_value_probes() {
  %ch0 = tfrt.new.chain
  %a = "tfrt_test.async_value_get"() : () -> !tfrt.string
  %b = "tfrt_test.async_value_ref"() : () -> !tfrt.string
  // CHECK-NEXT: string = base1:base2:final_class:3
  %ch1 = "tfrt_test.print_string"(%a, %ch0) : (!tfrt.string, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: string = available:2;unavailable;(3);available:3;unavailable;available:4
  %ch2 = "tfrt_test.print_string"(%b, %ch1) : (!tfrt.string, !tfrt.chain) -> !tfrt.chain
  tfrt.return
}

// CHECK-LABEL: --- Running 'aliasing'
func.func @aliasing() -> (i32, i32, i32, i32, i32, i32, i32) {
  %ch0 = tfrt.new.chain
  %x = tfrt.constant.i32 10
  %a, %b, %c = tfrt_test.count3.i32 %x
  %i = "tfrt_test.identity"(%ch0, %a) : (!tfrt.chain, i32) -> (i32)
  %p, %q, %r = "tfrt_test.multi_arg_result"(%a, %b, %c) : (i32, i32, i32) -> (i32, i32, i32)
  %m = "tfrt_test.make_indirect"(%x) : (i32) -> (i32)
  // CHECK-NEXT: 'aliasing' returned 11,11,11,12,13,10,10
  tfrt.return %a, %i, %p, %q, %r, %m, %x : i32, i32, i32, i32, i32, i32, i32
}

// CHECK-LABEL: --- Running 'uniqueness'
func.func @uniqueness() {
  %ch0 = tfrt.new.chain
  %x = tfrt.constant.i32 1
  %y = "tfrt_test.make_indirect"(%x) : (i32) -> (i32)
  // An indirect value is never unique.
  // CHECK-NEXT: false
  %u = "tfrt_test.get_uniqueness"(%y) : (i32) -> (i1)
  %ch1 = "tfrt_test.print_bool"(%ch0, %u) : (!tfrt.chain, i1) -> !tfrt.chain
  tfrt.return
}

// CHECK-LABEL: --- Running 'resources'
func.func @resources() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  // CHECK-NEXT: Allocated TestResource
  %r, %ch1 = "tfrt_test.allocate_resource"(%ch0) : (!tfrt.chain) -> (!tfrt.test.resource, !tfrt.chain)
  // CHECK-NEXT: Destroyed TestResource
  // CHECK-NEXT: tfrt_test.deallocate_resource done
  %ch2 = "tfrt_test.deallocate_resource"(%r, %ch1) : (!tfrt.test.resource, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: 'resources' returned !tfrt.chain value
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'shared_context'
func.func @shared_context() -> !tfrt.string {
  %ch0 = tfrt.new.chain
  %n1, %ch1 = "tfrt_test.use_sample_shared_context"(%ch0) : (!tfrt.chain) -> (!tfrt.string, !tfrt.chain)
  %n2, %ch2 = "tfrt_test.use_sample_shared_context"(%ch1) : (!tfrt.chain) -> (!tfrt.string, !tfrt.chain)
  // CHECK-NEXT: string = sample_shared_context0
  %ch3 = "tfrt_test.print_string"(%n2, %ch2) : (!tfrt.string, !tfrt.chain) -> !tfrt.chain
  tfrt.return %n1 : !tfrt.string
}

// CHECK-LABEL: --- Running 'logging'
func.func @logging() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %s = "tfrt_test.get_string"() {value = "msg"} : () -> !tfrt.string
  // CHECK-NEXT: {{^I [0-9-]+ [0-9:.]+ [0-9]+ .*\] from TFRT_LOG\(INFO\): msg$}}
  // CHECK-NEXT: {{^W .*\] from TFRT_LOG\(WARNING\): msg$}}
  // CHECK-NEXT: {{^E .*\] from TFRT_LOG\(ERROR\): msg$}}
  // CHECK-NEXT: from TFRT_LOG_IF(INFO, true): msg
  // CHECK-NEXT: from TFRT_LOG_IF(WARNING, true): msg
  // CHECK-NEXT: from TFRT_LOG_IF(ERROR, true): msg
  %ch1 = "tfrt_test.logging"(%s, %ch0) : (!tfrt.string, !tfrt.chain) -> !tfrt.chain
  // CHECK-NEXT: 'logging' returned !tfrt.chain value
  tfrt.return %ch1 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'test_cost'
func.func @test_cost() -> i32 {
  %c0 = tfrt.constant.i32 5
  // CHECK-NEXT: id: 7
  %c1 = tfrt_test.test_cost %c0 {id = 7 : i64, _tfrt_cost = 3 : i64} : i32
  // CHECK-NEXT: 'test_cost' returned 0
  tfrt.return %c1 : i32
}

// CHECK-LABEL: --- Running 'debug_info'
func.func @debug_info() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  // CHECK-NEXT: named_kernel
  %ch1 = "tfrt_test.print_debug_info"(%ch0) : (!tfrt.chain) -> !tfrt.chain loc("named_kernel")
  // CHECK-NEXT: Kernel has no debug info
  %ch2 = "tfrt_test.print_debug_info"(%ch1) : (!tfrt.chain) -> !tfrt.chain
  tfrt.return %ch2 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'thread_id'
func.func @thread_id() -> i32 {
  %ch0 = tfrt.new.chain
  // The host thread is the first thread to ask.
  %t = "tfrt_test.get_thread_id"(%ch0) : (!tfrt.chain) -> (i32)
  // CHECK-NEXT: 'thread_id' returned 0
  tfrt.return %t : i32
}
