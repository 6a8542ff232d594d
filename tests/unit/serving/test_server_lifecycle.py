"""Server life cycle end to end: version hot swap under load, dynamic batching, SIGTERM drain.

Real ``pytfrt serve --backend=onnxruntime`` subprocesses and real HTTP clients on threads.
Oracles: each version's ONNX model run directly in ONNX Runtime; the batching claims are proved
by the server's own Prometheus metrics.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from serving_helpers import copy_version, make_onnx_mlp, metric_value, ort_run


def _x(seed: int, rows: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 8)).astype(np.float32)


def _wait_for(predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


@pytest.mark.parametrize("backend", ["onnxruntime", "pytfrt"])
def test_hot_swap_under_load_fails_no_request(tmp_path: Path, server_factory: Any,
                                              backend: str) -> None:
    base = tmp_path / "models" / "mlp"
    v1 = make_onnx_mlp(base / "1" / "model.onnx", seed=10)
    v2 = make_onnx_mlp(tmp_path / "v2" / "model.onnx", seed=20)
    x = _x(0, rows=2)
    expected = {1: ort_run(v1, x), 2: ort_run(v2, x)}
    assert not np.allclose(expected[1], expected[2])
    server = server_factory(f"--backend={backend}", "--model_name=mlp",
                            f"--model_base_path={base}", "--file_system_poll_wait_seconds=0.1",
                            f"--compile_cache_dir={tmp_path / 'cache'}")

    stop = threading.Event()
    failures: list[str] = []
    seen: list[int] = []
    per_client: list[list[int]] = [[] for _ in range(4)]

    def client_loop(me: int) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            while not stop.is_set():
                r = client.post("/v1/models/mlp:predict", json={"instances": x.tolist()})
                if r.status_code != 200:
                    failures.append(f"{r.status_code}: {r.text}")
                    continue
                got = np.array(r.json()["predictions"], dtype=np.float32)
                match = [v for v, e in expected.items() if np.allclose(got, e, atol=1e-5)]
                if len(match) != 1:
                    failures.append(f"output matches no version: {got}")
                else:
                    per_client[me].append(match[0])
                    seen.append(match[0])

    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        _wait_for(lambda: len(seen) >= 20)
        copy_version(v2.parent, base, 2)

        def swapped() -> bool:
            status = httpx.get(f"{server.url}/v1/models/mlp", timeout=30).json()
            states = {s["version"]: s["state"] for s in status["model_version_status"]}
            return states == {"2": "AVAILABLE", "1": "END"}

        _wait_for(swapped)
        count = len(seen)
        _wait_for(lambda: len(seen) >= count + 20)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert failures == []
    assert seen[0] == 1 and seen[-1] == 2
    # Each client sends its next request after the last answer: once a client was answered by
    # version 2, it is never answered by version 1 again.  (The shared list's order is the order
    # the client threads appended in, which a descheduled thread can delay arbitrarily.)
    for versions in per_client:
        assert versions == sorted(versions), versions
    assert "version 1 unloaded" in server.log()


def test_a_version_that_fails_to_load_does_not_displace_the_served_one(
        tmp_path: Path, server_factory: Any) -> None:
    base = tmp_path / "mlp"
    v1 = make_onnx_mlp(base / "1" / "model.onnx", seed=1)
    server = server_factory("--backend=onnxruntime", "--model_name=mlp",
                            f"--model_base_path={base}", "--file_system_poll_wait_seconds=0.1")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.onnx").write_bytes(b"not an onnx model")
    copy_version(broken, base, 2)

    def failed() -> bool:
        status = httpx.get(f"{server.url}/v1/models/mlp/versions/2", timeout=30)
        return status.status_code == 200 and \
            status.json()["model_version_status"][0]["state"] == "END"

    _wait_for(failed)
    x = _x(3)
    r = httpx.post(f"{server.url}/v1/models/mlp:predict", json={"instances": x.tolist()},
                   timeout=30)
    assert r.status_code == 200
    np.testing.assert_allclose(np.array(r.json()["predictions"]), ort_run(v1, x), atol=1e-5)
    status = httpx.get(f"{server.url}/v1/models/mlp/versions/2", timeout=30).json()
    assert "failed to load" in status["model_version_status"][0]["status"]["error_message"]


def _batching_server(tmp_path: Path, server_factory: Any, timeout_us: int,
                     max_batch_size: int = 16) -> tuple[Any, Path]:
    base = tmp_path / "mlp"
    model = make_onnx_mlp(base / "1" / "model.onnx", seed=5)
    params = tmp_path / "batching.config"
    params.write_text(f"max_batch_size {{ value: {max_batch_size} }}\n"
                      f"batch_timeout_micros {{ value: {timeout_us} }}\n"
                      "num_batch_threads { value: 1 }\nmax_enqueued_batches { value: 8 }\n")
    server = server_factory("--backend=onnxruntime", "--model_name=mlp",
                            f"--model_base_path={base}", "--enable_batching",
                            f"--batching_parameters_file={params}",
                            "--file_system_poll_wait_seconds=0")
    return server, model


def _concurrent_predicts(url: str, inputs: list[np.ndarray]) -> list[httpx.Response]:
    responses: list[Any] = [None] * len(inputs)
    barrier = threading.Barrier(len(inputs))

    def one(i: int) -> None:
        barrier.wait()
        responses[i] = httpx.post(f"{url}/v1/models/mlp:predict",
                                  json={"instances": inputs[i].tolist()}, timeout=60)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return responses


def test_batching_merges_concurrent_requests(tmp_path: Path, server_factory: Any) -> None:
    server, model = _batching_server(tmp_path, server_factory, timeout_us=300_000)
    inputs = [_x(100 + i, rows=1 + i % 2) for i in range(8)]
    responses = _concurrent_predicts(server.url, inputs)
    for x, r in zip(inputs, responses, strict=True):
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(np.array(r.json()["predictions"]), ort_run(model, x),
                                   rtol=1e-6, atol=1e-6)
    text = server.metrics()
    batches = metric_value(text, ":tensorflow:serving:batching:processed_batch_size_count",
                           model_name="mlp")
    rows = metric_value(text, ":tensorflow:serving:batching:processed_batch_size_sum",
                        model_name="mlp")
    merged = metric_value(text, ":tensorflow:serving:batching:merged_request_count",
                          model_name="mlp")
    assert merged == 8
    assert rows == sum(x.shape[0] for x in inputs)
    assert 1 <= batches < 8, text  # requests were merged: fewer batches than requests
    assert metric_value(text, ":tensorflow:serving:batching:batch_delay_us_count",
                        model_name="mlp") == 8


def test_batching_refuses_a_request_over_max_batch_size(tmp_path: Path,
                                                        server_factory: Any) -> None:
    server, model = _batching_server(tmp_path, server_factory, timeout_us=0, max_batch_size=4)
    r = httpx.post(f"{server.url}/v1/models/mlp:predict",
                   json={"instances": _x(0, rows=5).tolist()}, timeout=30)
    assert r.status_code == 400
    assert "larger than maximum batch size 4" in r.json()["error"]
    x = _x(1, rows=4)
    r = httpx.post(f"{server.url}/v1/models/mlp:predict", json={"instances": x.tolist()},
                   timeout=30)
    assert r.status_code == 200
    np.testing.assert_allclose(np.array(r.json()["predictions"]), ort_run(model, x), atol=1e-6)


def test_sigterm_drains_in_flight_requests_then_exits_0(tmp_path: Path,
                                                        server_factory: Any) -> None:
    # A 1.5 s batch timeout keeps the requests in flight when SIGTERM arrives.
    server, model = _batching_server(tmp_path, server_factory, timeout_us=1_500_000)
    inputs = [_x(200 + i) for i in range(3)]
    results: list[Any] = []
    t = threading.Thread(target=lambda: results.extend(_concurrent_predicts(server.url, inputs)))
    t.start()
    _wait_for(lambda: metric_value(server.metrics(), ":pytfrt:serving:requests_in_flight",
                                   model_name="mlp") == 3)
    server.terminate()
    t.join()
    assert server.wait(timeout=60) == 0, server.log()
    for x, r in zip(inputs, results, strict=True):
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(np.array(r.json()["predictions"]), ort_run(model, x),
                                   atol=1e-6)
    assert "drained in-flight requests" in server.log()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/v1/models/mlp", timeout=5)


def test_config_errors_exit_with_a_message(tmp_path: Path) -> None:
    import subprocess
    import sys

    bad = tmp_path / "models.config"
    bad.write_text("model_config_list { config { name: 'a' base_path: '/x' colour: 1 } }")
    out = subprocess.run(
        [sys.executable, "-m", "pytfrt.tools.pytfrt_cli", "serve", f"--model_config_file={bad}"],
        capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2
    assert "unsupported field 'colour'" in out.stderr
    assert "Traceback" not in out.stderr


def test_single_threaded_work_queue_serves(tmp_path: Path, server_factory: Any) -> None:
    base = tmp_path / "mlp"
    model = make_onnx_mlp(base / "1" / "model.onnx", seed=9)
    # Also the pure-Python HTTP stack (h11 on asyncio's loop), whatever "auto" would pick.
    server = server_factory("--backend=onnxruntime", "--work_queue_type=s", "--model_name=mlp",
                            f"--model_base_path={base}", "--file_system_poll_wait_seconds=0",
                            "--http_parser=h11", "--event_loop=asyncio")
    inputs = [_x(300 + i) for i in range(4)]
    for x, r in zip(inputs, _concurrent_predicts(server.url, inputs), strict=True):
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(np.array(r.json()["predictions"]), ort_run(model, x),
                                   atol=1e-6)
    assert server.stop() == 0, server.log()


@pytest.mark.parametrize("flag,words", [
    ("--work_queue_type=mstd:0", "mstd"),
    ("--tensorflow_intra_op_parallelism=-1", "must not be negative"),
    ("--max_request_bytes=0", "must be positive"),
    ("--batching_parameters_file=/nonexistent", "needs --enable_batching"),
    ("--http_parser=nginx", "unknown HTTP parser 'nginx'"),
    ("--event_loop=trio", "unknown event loop 'trio'"),
])
def test_bad_flags_are_errors(tmp_path: Path, flag: str, words: str) -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "pytfrt.tools.pytfrt_cli", "serve", flag,
         f"--model_base_path={tmp_path}"],
        capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2
    assert "pytfrt serve: error:" in out.stderr and words in out.stderr
    assert "Traceback" not in out.stderr


def test_version_policies_route_requests(tmp_path: Path, server_factory: Any) -> None:
    base = tmp_path / "mlp"
    models = {v: make_onnx_mlp(base / str(v) / "model.onnx", seed=40 + v) for v in (1, 2, 3)}
    config = tmp_path / "models.config"
    config.write_text(f"""model_config_list {{
        config {{ name: "every" base_path: "{base}" model_version_policy {{ all {{}} }} }}
        config {{ name: "pinned" base_path: "{base}"
                  model_version_policy {{ specific {{ versions: 1 versions: 3 }} }}
                  version_labels {{ key: "old" value: 1 }} }}
        config {{ name: "latest2" base_path: "{base}"
                  model_version_policy {{ latest {{ num_versions: 2 }} }} }}
        config {{ name: "later" base_path: "{tmp_path / 'later'}" }}
    }}""")
    server = server_factory("--backend=onnxruntime", f"--model_config_file={config}",
                            "--file_system_poll_wait_seconds=0.1")
    x = _x(7)

    def predict(path: str) -> httpx.Response:
        return httpx.post(f"{server.url}/v1/models/{path}:predict",
                          json={"instances": x.tolist()}, timeout=30)

    def served_by(r: httpx.Response) -> int:
        assert r.status_code == 200, r.text
        got = np.array(r.json()["predictions"], dtype=np.float32)
        (version,) = [v for v, m in models.items() if np.allclose(got, ort_run(m, x), atol=1e-6)]
        return version

    assert [served_by(predict(f"every/versions/{v}")) for v in (1, 2, 3)] == [1, 2, 3]
    assert served_by(predict("every")) == 3
    assert served_by(predict("pinned")) == 3
    assert served_by(predict("pinned/labels/old")) == 1
    assert predict("pinned/versions/2").status_code == 404
    assert served_by(predict("latest2/versions/2")) == 2
    assert predict("latest2/versions/1").status_code == 404
    status = httpx.get(f"{server.url}/v1/models/latest2", timeout=30).json()
    assert [s["version"] for s in status["model_version_status"]] == ["3", "2"]
    # A model whose base path is still empty waits for its first version.
    assert predict("later").status_code == 404
    copy_version(models[2].parent, tmp_path / "later", 5)
    _wait_for(lambda: predict("later").status_code == 200)
    assert served_by(predict("later/versions/5")) == 2


def test_a_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "pytfrt.tools.pytfrt_cli", "serve", f"--rest_api_port={port}",
             "--port=0",
             f"--model_base_path={tmp_path}"],
            capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr
    assert "Traceback" not in out.stderr


def test_auto_http_stack_takes_the_fast_one_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytfrt.serving import server

    monkeypatch.setattr(server, "_importable", lambda module: True)
    assert (server.resolve_http("auto"), server.resolve_loop("auto")) == ("httptools", "uvloop")
    monkeypatch.setattr(server, "_importable", lambda module: False)
    assert (server.resolve_http("auto"), server.resolve_loop("auto")) == ("h11", "asyncio")
    with pytest.raises(ValueError, match="needs the httptools package"):
        server.resolve_http("httptools")
    with pytest.raises(ValueError, match="needs the uvloop package"):
        server.resolve_loop("uvloop")


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_during_model_load_ends_the_server(tmp_path: Path, keras_mlp: Any,
                                                    sig: str) -> None:
    # The tensorflow backend's first load imports TensorFlow (seconds): the signal lands in it.
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "pytfrt.tools.pytfrt_cli", "serve", "--rest_api_port=0",
         "--port=0", "--backend=tensorflow", "--model_name=mlp",
         f"--model_base_path={keras_mlp.base}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "version 1: loading" in line:
                break
        proc.send_signal(getattr(signal, sig))
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "terminated during start-up" in err
    assert "AVAILABLE" not in err and "Traceback" not in err
    assert "Exporting HTTP/REST API" not in out


def test_rest_timeout_and_monitoring_config(tmp_path: Path, server_factory: Any) -> None:
    base = tmp_path / "models" / "mlp"
    make_onnx_mlp(base / "1" / "model.onnx", seed=30)
    monitoring = tmp_path / "monitoring.config"
    monitoring.write_text('prometheus_config { enable: true, path: "/metrics/here" }\n')
    server = server_factory("--backend=onnxruntime", "--model_name=mlp",
                            f"--model_base_path={base}", "--rest_api_timeout_in_ms=1",
                            f"--monitoring_config_file={monitoring}")
    # 20,000 rows (1.5 MB of JSON): decoding alone takes longer than 1 ms.
    body = {"instances": _x(1, rows=20_000).tolist()}
    response = httpx.post(f"{server.url}/v1/models/mlp:predict", json=body, timeout=60)
    assert response.status_code == 504, response.text
    assert response.json() == {"error": "Request timed out (--rest_api_timeout_in_ms)"}
    metrics = httpx.get(f"{server.url}/metrics/here", timeout=30)
    assert metrics.status_code == 200
    assert metric_value(metrics.text, ":tensorflow:serving:request_count", model_name="mlp",
                        status="DEADLINE_EXCEEDED") == 1
    assert httpx.get(f"{server.url}/monitoring/prometheus/metrics", timeout=30).status_code == 404
