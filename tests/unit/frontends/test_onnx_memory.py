"""The ONNX import holds one copy of the weights (``onnx_load.load_split``), bit for bit what
``onnx.numpy_helper`` reads, and ``pytfrt.compile`` of a file peaks near the weights' size.

The oracles: ``onnx.numpy_helper.to_array`` on ``onnx.load``'s ModelProto (the arrays), ONNX
Runtime (the outputs), the kernel's own peak RSS counter (``VmHWM``, reset through
``/proc/self/clear_refs``) for the memory bound.
"""

from __future__ import annotations

import ctypes
import gc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from pytfrt.compiler.frontends.onnx import OnnxImportError, import_onnx  # noqa: E402
from pytfrt.compiler.frontends.onnx_load import SPLIT_BYTES, load_split  # noqa: E402


def _dense_chain(path: Path, width: int, layers: int, seed: int = 0) -> int:
    """``x [1, width]`` through ``layers`` x (MatMul by a ``[width, width]`` weight, Add a
    bias, Relu), saved to ``path``; returns the initializers' bytes."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    prev = "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        b = rng.standard_normal(width).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
                  helper.make_node("Relu", [f"a{i}"], [f"y{i}"])]
        prev = f"y{i}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return sum(t.raw_data.__len__() for t in inits)


def _ort(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return list(sess.run(None, feeds))


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


_DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int32, np.int8, np.uint8,
           np.uint16, np.bool_]


def _mixed_model(path: Path, seed: int = 0) -> dict[str, np.ndarray]:
    """A model whose initializers are of every plain dtype, large and small; the arrays."""
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    for dt in _DTYPES:
        for size in (3, SPLIT_BYTES // np.dtype(dt).itemsize + 5):
            arrays[f"{np.dtype(dt).name}_{size}"] = (
                rng.integers(0, 2, (size, 2)).astype(dt) if dt is np.bool_
                else (rng.standard_normal((size, 2)) * 50).astype(dt))
    inits = [numpy_helper.from_array(a, n) for n, a in arrays.items()]
    # one more in int32_data (not raw_data): left in the ModelProto
    inits.append(helper.make_tensor("typed", TensorProto.INT32, [4000], list(range(4000))))
    arrays["typed"] = np.arange(4000, dtype=np.int32)
    outs = [helper.make_tensor_value_info(f"o_{n}", TensorProto.UNDEFINED, None) for n in arrays]
    nodes = [helper.make_node("Identity", [n], [f"o_{n}"]) for n in arrays]
    graph = helper.make_graph(nodes, "mixed", [], outs, inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return arrays


def test_split_arrays_are_numpy_helpers_bits(tmp_path: Path) -> None:
    path = tmp_path / "mixed.onnx"
    arrays = _mixed_model(path)
    model, weights = load_split(path)
    want = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}
    kept = {t.name for t in model.graph.initializer}
    assert set(weights) | kept == set(want) and not set(weights) & kept
    for name, arr in weights.items():
        assert _same_bits(arr, want[name]), name
        assert arr.nbytes >= SPLIT_BYTES
    for name in kept:  # small or not raw_data: still in the ModelProto, unchanged
        assert want[name].nbytes < SPLIT_BYTES or name == "typed"
    assert "typed" in kept
    assert {n for n, a in arrays.items() if a.nbytes >= SPLIT_BYTES and n != "typed"} == set(
        weights)
    # the rest of the model is the same protobuf (nodes, outputs, opsets)
    full = onnx.load(str(path))
    assert model.graph.node == full.graph.node and model.graph.output == full.graph.output
    assert model.opset_import == full.opset_import


def test_split_import_runs_like_onnxruntime(tmp_path: Path) -> None:
    import pytfrt

    path = tmp_path / "chain.onnx"
    _dense_chain(path, 96, 3)
    x = np.random.default_rng(1).standard_normal((1, 96)).astype(np.float32)
    (want,) = _ort(path, {"x": x})
    got = pytfrt.compile(path)(x=x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # the graph's weights are the file's arrays, bit for bit
    gm = import_onnx(path)
    for t in onnx.load(str(path)).graph.initializer:
        if t.name in gm.weights:
            assert _same_bits(gm.weights[t.name], numpy_helper.to_array(t))


def test_external_data_is_read_once(tmp_path: Path) -> None:
    import pytfrt

    src = tmp_path / "chain.onnx"
    _dense_chain(src, 96, 2, seed=3)
    model = onnx.load(str(src))
    ext = tmp_path / "ext" / "chain.onnx"
    ext.parent.mkdir()
    onnx.save_model(model, str(ext), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=1024)
    proto, weights = load_split(ext)
    assert {"w0", "w1"} <= set(weights)
    for t in onnx.load(str(src)).graph.initializer:  # (saving made ``model``'s external)
        if t.name in weights:
            assert _same_bits(weights[t.name], numpy_helper.to_array(t))
    x = np.random.default_rng(2).standard_normal((1, 96)).astype(np.float32)
    (want,) = _ort(src, {"x": x})
    np.testing.assert_allclose(pytfrt.compile(ext)(x=x), want, rtol=1e-5, atol=1e-5)
    (ext.parent / "weights.bin").write_bytes(b"short")
    with pytest.raises(OnnxImportError, match="w0|w1|b0|b1"):
        import_onnx(ext)


@pytest.fixture(scope="module")
def chain_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("onnx_memory") / "chain.onnx"
    _dense_chain(path, 64, 2, seed=5)
    return path


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_files_read_as_onnx_reads_them(chain_file: Path, tmp_path: Path,
                                               data: Any) -> None:
    """A truncated or byte-flipped file is read to the ModelProto and arrays ``onnx.load``
    makes of it, or refused with :class:`OnnxImportError` when ``onnx.load`` refuses it too
    (never a scanner error, never a hang)."""
    from pytfrt.compiler.frontends.onnx import _load_with_weights

    blob = bytearray(chain_file.read_bytes())
    if data.draw(st.booleans(), "truncate"):
        blob = blob[: data.draw(st.integers(0, len(blob) - 1), "cut")]
    else:
        for _ in range(data.draw(st.integers(1, 4), "flips")):
            i = data.draw(st.integers(0, len(blob) - 1), "at")
            blob[i] ^= data.draw(st.integers(1, 255), "mask")
    path = tmp_path / "damaged.onnx"
    path.write_bytes(bytes(blob))
    try:
        model, _, weights = _load_with_weights(path)
    except OnnxImportError:
        try:
            full = onnx.load(str(path))
        except Exception:  # noqa: BLE001 - onnx refuses it as well
            return
        assert not full.graph.node and not full.graph.output
        return
    full = onnx.load(str(path))
    assert model.graph.node == full.graph.node and model.graph.output == full.graph.output
    kept = {t.name: t for t in model.graph.initializer}
    names = [t.name for t in full.graph.initializer]
    for t in full.graph.initializer:
        if names.count(t.name) > 1:
            continue  # a flipped name made two initializers one name: an invalid model
        if t.name in weights:
            assert _same_bits(weights[t.name], numpy_helper.to_array(t))
        else:
            assert kept[t.name] == t


def _status(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(key)


def test_compile_holds_one_copy_of_the_weights(tmp_path: Path) -> None:
    """The peak RSS while ``pytfrt.compile`` reads, optimises, lowers and packs a file of
    24 MB of weights stays below 1.6 x those bytes (it was over 2x: the ModelProto's bytes,
    the arrays, and every packed weight beside its plain copy)."""
    import pytfrt

    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")  # resets VmHWM
    except OSError:
        pytest.skip("no /proc/self/clear_refs: the peak RSS cannot be reset")
    warm, big = tmp_path / "warm.onnx", tmp_path / "big.onnx"
    _dense_chain(warm, 768, 2, seed=7)  # loads the compiler, the kernels and oneDNN
    raw = _dense_chain(big, 1024, 6, seed=8)
    x = np.ones((1, 1024), np.float32)
    pytfrt.compile(warm)(x=x[:, :768])
    (want,) = _ort(big, {"x": x})
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed heap back to the system
    except (OSError, AttributeError):
        pass
    base = _status("VmRSS")
    with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
        fh.write("5")
    model = pytfrt.compile(big)
    peak = _status("VmHWM") - base
    np.testing.assert_allclose(model(x=x), want, rtol=1e-5, atol=1e-5)
    assert peak < 1.6 * raw, f"compile peaked {peak / 2**20:.1f} MB over {raw / 2**20:.1f} MB"


def test_load_holds_one_copy_of_the_weights(tmp_path: Path) -> None:
    """``pytfrt.load`` of a saved model: the same bound (the weights file's arrays are given
    to the model alone, and each packed weight's plain copy or file pages go as it is
    packed)."""
    import pytfrt

    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        pytest.skip("no /proc/self/clear_refs: the peak RSS cannot be reset")
    warm, big = tmp_path / "warm.onnx", tmp_path / "big.onnx"
    _dense_chain(warm, 768, 2, seed=9)
    raw = _dense_chain(big, 1024, 6, seed=10)
    x = np.ones((1, 1024), np.float32)
    pytfrt.compile(warm)(x=x[:, :768])
    pytfrt.compile(big).save(tmp_path / "saved")
    (want,) = _ort(big, {"x": x})
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    base = _status("VmRSS")
    with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
        fh.write("5")
    model = pytfrt.load(tmp_path / "saved")
    peak = _status("VmHWM") - base
    np.testing.assert_allclose(model(x=x), want, rtol=1e-5, atol=1e-5)
    assert peak < 1.6 * raw, f"load peaked {peak / 2**20:.1f} MB over {raw / 2**20:.1f} MB"
