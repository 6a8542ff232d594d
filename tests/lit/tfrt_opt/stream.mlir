// RUN: tfrt_opt -tfrt-print-stream -verify-diagnostics %s

// The function's remark is its root stream's, with the streams forked from the root.
// expected-remark @+1 {{stream id: 0, stream cost: 4, parent stream: -1, child streams: [1]}}
func.func @stream() -> i32 attributes {tfrt.cost_threshold = 2 : i64} {
  // expected-remark @+1 {{stream id: 1, stream cost: 2, parent stream: 0}}
  %a = tfrt.constant.i32 1
  // expected-remark @+1 {{stream id: 0, stream cost: 4, parent stream: -1}}
  %b = tfrt.constant.i32 2
  // expected-remark @+1 {{stream id: 0, stream cost: 4, parent stream: -1}}
  tfrt.return %b : i32
}
