// RUN: tfrt_opt -tfrt-print-stream -verify-diagnostics %s
// no_bef_translation

// Reconstruction of TFRT's mlir_tests/compiler/stream_analysis.mlir: the stream
// id, stream cost, parent stream and child streams of every op, printed as remarks.

// The function's own remark: the root stream.
// expected-remark @+1 {{stream id: 0, stream cost: 17, parent stream: -1}}
func.func @stream() -> i32 attributes {tfrt.cost_threshold = 4 : i64} {
  // expected-remark @+1 {{stream id: 0, stream cost: 17, parent stream: -1}}
  %c0 = tfrt.constant.i32 0
  // expected-remark @+1 {{stream id: 0, stream cost: 17, parent stream: -1}}
  %c1 = tfrt_test.test_cost %c0 {id = 1 : i64, _tfrt_cost = 3 : i64} : i32
  // expected-remark @+1 {{stream id: 0, stream cost: 17, parent stream: -1}}
  %c2 = tfrt_test.test_cost %c0 {id = 2 : i64, _tfrt_cost = 3 : i64} : i32
  // expected-remark @+1 {{stream id: 0, stream cost: 17, parent stream: -1}}
  %c3 = tfrt_test.test_cost %c1 {id = 3 : i64, _tfrt_cost = 1 : i64} : i32
  // expected-remark @+1 {{stream id: 0, stream cost: 17, parent stream: -1}}
  %c4 = tfrt.add.i32 %c2, %c3
  // expected-remark @+1 {{stream id: 0, stream cost: 17, parent stream: -1}}
  tfrt.return %c4 : i32
}

// expected-remark @+1 {{stream id: 0, stream cost: 9, parent stream: -1}}
func.func @no_merge() -> (i32, i32) attributes {tfrt.cost_threshold = 2 : i64} {
  // expected-remark @+1 {{stream id: 0, stream cost: 9, parent stream: -1, child streams: [1]}}
  %c0 = tfrt.constant.i32 0
  // expected-remark @+1 {{stream id: 0, stream cost: 9, parent stream: -1}}
  %c1 = tfrt_test.test_cost %c0 {id = 1 : i64, _tfrt_cost = 5 : i64} : i32
  // expected-remark @+1 {{stream id: 1, stream cost: 5, parent stream: 0}}
  %c2 = tfrt_test.test_cost %c0 {id = 2 : i64, _tfrt_cost = 5 : i64} : i32
  // expected-remark @+1 {{stream id: 0, stream cost: 9, parent stream: -1}}
  tfrt.return %c1, %c2 : i32, i32
}

// expected-remark @+1 {{stream id: 0, stream cost: 109, parent stream: -1}}
func.func @merge() -> !tfrt.chain attributes {tfrt.cost_threshold = 100 : i64} {
  // expected-remark @+1 {{stream id: 3, stream cost: 100, parent stream: 0}}
  %ch0 = tfrt.new.chain
  // expected-remark @+1 {{stream id: 0, stream cost: 109, parent stream: -1}}
  %c0 = tfrt.constant.i32 0
  // expected-remark @+1 {{stream id: 0, stream cost: 109, parent stream: -1}}
  %c1 = tfrt_test.test_cost %c0 {id = 1 : i64, _tfrt_cost = 2 : i64} : i32
  // expected-remark @+1 {{stream id: 0, stream cost: 109, parent stream: -1}}
  %c2 = tfrt_test.test_cost %c0 {id = 2 : i64, _tfrt_cost = 2 : i64} : i32
  // expected-remark @+1 {{stream id: 0, stream cost: 109, parent stream: -1}}
  %c3 = tfrt_test.test_cost %c0 {id = 3 : i64, _tfrt_cost = 2 : i64} : i32
  // expected-remark @+1 {{stream id: 0, stream cost: 109, parent stream: -1}}
  %ch1 = tfrt.merge.chains %ch0, %c1, %c2, %c3 : !tfrt.chain, i32, i32, i32
  // expected-remark @+1 {{stream id: 0, stream cost: 109, parent stream: -1}}
  tfrt.return %ch1 : !tfrt.chain
}

// expected-remark @+1 {{stream id: 0, stream cost: 14, parent stream: -1}}
func.func @auto_threshold() -> i32 {
  // expected-remark @+1 {{stream id: 0, stream cost: 14, parent stream: -1, child streams: [1]}}
  %c0 = tfrt.constant.i32 0
  // expected-remark @+1 {{stream id: 0, stream cost: 14, parent stream: -1}}
  %c1 = tfrt_test.test_cost %c0 {id = 1 : i64, _tfrt_cost = 10 : i64} : i32
  // expected-remark @+1 {{stream id: 1, stream cost: 2, parent stream: 0}}
  %c2 = tfrt_test.test_cost %c0 {id = 2 : i64, _tfrt_cost = 1 : i64} : i32
  // expected-remark @+1 {{stream id: 1, stream cost: 2, parent stream: 0}}
  %c3 = tfrt_test.test_cost %c2 {id = 3 : i64, _tfrt_cost = 1 : i64} : i32
  // expected-remark @+1 {{stream id: 0, stream cost: 14, parent stream: -1}}
  %c4 = tfrt.add.i32 %c1, %c3
  // expected-remark @+1 {{stream id: 0, stream cost: 14, parent stream: -1}}
  tfrt.return %c4 : i32
}

// expected-remark @+1 {{stream id: 0, stream cost: 28, parent stream: -1}}
func.func @merge_inter_dependent_streams() -> i32 attributes {tfrt.cost_threshold = 10 : i64, tfrt.merge_inter_dependent_streams = true} {
  // expected-remark @+1 {{stream id: 0, stream cost: 28, parent stream: -1}}
  %c0 = tfrt.constant.i32 0
  // expected-remark @+1 {{stream id: 0, stream cost: 28, parent stream: -1}}
  %c1 = tfrt_test.test_cost %c0 {id = 1 : i64, _tfrt_cost = 2 : i64} : i32
  // expected-remark @+1 {{stream id: 0, stream cost: 28, parent stream: -1}}
  %c2 = tfrt_test.test_cost %c0 {id = 2 : i64, _tfrt_cost = 2 : i64} : i32
  // expected-remark @+1 {{stream id: 0, stream cost: 28, parent stream: -1}}
  %c3 = tfrt.add.i32 %c1, %c2
  // expected-remark @+1 {{stream id: 0, stream cost: 28, parent stream: -1}}
  %c4 = tfrt_test.test_cost %c3 {id = 4 : i64, _tfrt_cost = 2 : i64} : i32
  // expected-remark @+1 {{stream id: 0, stream cost: 28, parent stream: -1}}
  tfrt.return %c4 : i32
}

// tfrt_test.test_cost with several operands and a trailing type list has one i32 result (TFRT's
// main branch: `$args attr-dict : type($args)`).  Reverse program order makes the return's
// stream 0 (which %c4 and %c2, %c4's costliest operand, join), %c3's stream 1 and %c1's stream
// 2; the root's child streams in program order are 2, 0, 1: the cheap 1 (cost 4 < 5) merges
// into the cheap 2 (cost 8), and the root joins stream 0, the return's.
// expected-remark @+1 {{stream id: 0, stream cost: 14, parent stream: -1, child streams: [2]}}
func.func @several_operands(%c0: i32) -> i32 attributes {tfrt.cost_threshold = 5 : i64} {
  // expected-remark @+1 {{stream id: 2, stream cost: 8, parent stream: 0}}
  %c1 = tfrt_test.test_cost %c0 {id = 1 : i64, _tfrt_cost = 4 : i64} : i32
  // expected-remark @+1 {{stream id: 0, stream cost: 14, parent stream: -1}}
  %c2 = tfrt_test.test_cost %c0 {id = 2 : i64, _tfrt_cost = 11 : i64} : i32
  // expected-remark @+1 {{stream id: 2, stream cost: 8, parent stream: 0}}
  %c3 = tfrt_test.test_cost %c0 {id = 3 : i64, _tfrt_cost = 4 : i64} : i32
  // expected-remark @+1 {{stream id: 0, stream cost: 14, parent stream: -1}}
  %c4 = tfrt_test.test_cost %c1, %c2, %c3 {id = 4 : i64, _tfrt_cost = 1 : i64} : i32, i32, i32
  // expected-remark @+1 {{stream id: 0, stream cost: 14, parent stream: -1}}
  tfrt.return %c4 : i32
}
