// RUN: tfrt_opt -tfrt-print-stream -verify-diagnostics %s > /dev/null
// no_bef_translation

// tfrt.upper_cost_threshold caps a stream's cost: the op that would take the stream past it
// starts a new stream, which becomes the parent.  The function itself carries the remark of
// its root stream.  test_cost without a type list works on chains.
module attributes {tfrt.cost_threshold = 10 : i64} {

// expected-remark@+1 {{stream id: 1, stream cost: 13, parent stream: -1}}
func.func @capped(%c0: !tfrt.chain) -> !tfrt.chain attributes {tfrt.upper_cost_threshold = 14} {
  // expected-remark@+1 {{stream id: 1, stream cost: 13, parent stream: -1}}
  %c1 = tfrt_test.test_cost %c0 {id = 0 : i64, _tfrt_cost = 6 : i64}
  // expected-remark@+1 {{stream id: 1, stream cost: 13, parent stream: -1}}
  %c2 = tfrt_test.test_cost %c1 {id = 1 : i64, _tfrt_cost = 6 : i64}
  // expected-remark@+1 {{stream id: 0, stream cost: 13, parent stream: 1}}
  %c3 = tfrt_test.test_cost %c2 {id = 2 : i64, _tfrt_cost = 6 : i64}
  // expected-remark@+1 {{stream id: 0, stream cost: 13, parent stream: 1}}
  %c4 = tfrt_test.test_cost %c3 {id = 3 : i64, _tfrt_cost = 6 : i64}
  // expected-remark@+1 {{stream id: 0, stream cost: 13, parent stream: 1}}
  tfrt.return %c4 : !tfrt.chain
}

// Without the cap the chain of dependent ops is one stream.
// expected-remark@+1 {{stream id: 0, stream cost: 26, parent stream: -1}}
func.func @uncapped(%c0: !tfrt.chain) -> !tfrt.chain {
  // expected-remark@+1 {{stream id: 0, stream cost: 26, parent stream: -1}}
  %c1 = tfrt_test.test_cost %c0 {id = 0 : i64, _tfrt_cost = 6 : i64}
  // expected-remark@+1 {{stream id: 0, stream cost: 26, parent stream: -1}}
  %c2 = tfrt_test.test_cost %c1 {id = 1 : i64, _tfrt_cost = 6 : i64}
  // expected-remark@+1 {{stream id: 0, stream cost: 26, parent stream: -1}}
  %c3 = tfrt_test.test_cost %c2 {id = 2 : i64, _tfrt_cost = 6 : i64}
  // expected-remark@+1 {{stream id: 0, stream cost: 26, parent stream: -1}}
  %c4 = tfrt_test.test_cost %c3 {id = 3 : i64, _tfrt_cost = 6 : i64}
  // expected-remark@+1 {{stream id: 0, stream cost: 26, parent stream: -1}}
  tfrt.return %c4 : !tfrt.chain
}

}
