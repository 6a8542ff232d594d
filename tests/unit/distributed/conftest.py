"""The distributed tests' shared local Ray cluster: 2 workers, started once per session.

Ray's object store is kept small (200 MB) and Ray is shut down at the end of the session.
Tests that kill workers restart them before they finish (``restore_workers``), so every test
sees two live workers.  Without Ray installed the directory is not collected.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import dist_programs as programs
import pytest

# Without Ray (the optional extra pytfrt[ray]) the directory is not collected; Ray itself is
# imported only when a test asks for the cluster.
if importlib.util.find_spec("ray") is None:
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def cluster() -> Iterator[object]:
    from pytfrt.distributed import Cluster

    with Cluster(num_workers=2, object_store_memory=200 * 1024 * 1024,
                 default_timeout=60.0) as c:
        yield c


@pytest.fixture(scope="session")
def program_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("dist_programs")
    (d / "basic.mlir").write_text(programs.BASIC)
    (d / "unknown_kernel.mlir").write_text(programs.UNKNOWN_KERNEL)
    return d


@pytest.fixture(scope="session")
def basic(cluster: object, program_dir: Path) -> object:
    return cluster.load(program_dir / "basic.mlir")  # type: ignore[attr-defined]


@pytest.fixture
def restore_workers(cluster: object) -> Iterator[None]:
    yield
    for i in range(cluster.num_workers):  # type: ignore[attr-defined]
        try:
            cluster.worker_pid(i, timeout=10)  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - lost: bring it back for the next test
            cluster.restart_worker(i)  # type: ignore[attr-defined]


@pytest.fixture(params=["one_node", "reduce_scatter"])
def reduction_path(request: pytest.FixtureRequest, cluster: object,
                   monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test with both all-reduce algorithms: in place on the shared object store (the
    local cluster's own case) and the multi-node reduce-scatter (forced here)."""
    if request.param == "reduce_scatter":
        monkeypatch.setattr(cluster, "_one_node", lambda: False)
    return str(request.param)
