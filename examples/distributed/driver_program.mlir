// The driver's program: remote execution and an all-reduce expressed with tfrt_dist.* kernels.
// Each worker doubles its shard; the results are summed in the cluster and fetched.
// Run with: python examples/distributed/run_driver_program.py
func.func @main(%x0: !t.tensor, %x1: !t.tensor) -> !t.tensor {
  %y0 = "tfrt_dist.remote_execute"(%x0) {program = "worker_program", function = "scale", worker = 0 : i32}
      : (!t.tensor) -> !tfrt_dist.remote
  %y1 = "tfrt_dist.remote_execute"(%x1) {program = "worker_program", function = "scale", worker = 1 : i32}
      : (!t.tensor) -> !tfrt_dist.remote
  %sum = "tfrt_dist.all_reduce"(%y0, %y1) {op = "sum"} : (!tfrt_dist.remote, !tfrt_dist.remote) -> !tfrt_dist.remote
  %t = "tfrt_dist.fetch"(%sum) : (!tfrt_dist.remote) -> !t.tensor
  %ch0 = tfrt.new.chain
  %ch1 = tfrt_dht.print_tensor %t, %ch0
  tfrt.return %t : !t.tensor
}
