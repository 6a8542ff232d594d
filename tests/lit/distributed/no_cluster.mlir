// RUN: not bef_executor %s.bef 2>&1 | FileCheck %s

// The tfrt_dist.* kernels load lazily by prefix and, on a HostContext without an attached
// pytfrt.distributed Cluster (as in bef_executor), fail with a diagnostic saying so; Ray is not
// needed for this.  Programs that run against a cluster: tests/unit/distributed.

// CHECK-LABEL: --- Running 'num_workers'
func.func @num_workers() -> i32 {
  // CHECK: runtime error: tfrt_dist: no pytfrt.distributed Cluster is attached to this HostContext (call cluster.attach(host))
  %n = "tfrt_dist.num_workers"() : () -> i32
  // CHECK: 'num_workers' returned <<error: tfrt_dist: no pytfrt.distributed Cluster is attached
  tfrt.return %n : i32
}
