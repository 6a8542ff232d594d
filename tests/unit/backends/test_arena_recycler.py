"""``arena.Recycler``: a large result's block is handed out again only once every array over it
is gone; the dense layer whose result leaves a compiled model (an LM head's logits) returns
fresh values on every call and never overwrites a result the caller still holds."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from pytfrt.backends.cpu import arena

BIG = (512, 2049)  # 4.2 MB of float32: above RECYCLE_MIN_BYTES


def test_block_reused_only_when_nothing_views_it():
    rec = arena.Recycler()
    a = rec.empty(BIG, np.float32)
    assert a.shape == BIG and a.flags.c_contiguous and a.flags.writeable and arena.owns(a)
    assert a.ctypes.data % arena.ALIGNMENT == 0
    addr = a.ctypes.data
    a[...] = 1
    held = a[3]  # a view keeps the block
    del a
    b = rec.empty(BIG, np.float32)
    assert b.ctypes.data != addr and (held == 1).all()
    del held
    c = rec.empty(BIG, np.float32)  # the first block is free again, but b's is the kept one
    assert c.ctypes.data != b.ctypes.data
    addr_c = c.ctypes.data
    del b, c
    d = rec.empty(BIG, np.float32)
    assert d.ctypes.data == addr_c
    assert rec.empty((512, 2048), np.float32).ctypes.data != d.ctypes.data  # other shape


def test_small_results_are_plain_aligned_arrays():
    rec = arena.Recycler()
    a = rec.empty((64, 768), np.float32)
    addr = a.ctypes.data
    assert arena.owns(a) and addr % arena.ALIGNMENT == 0
    keep = [a]
    del a
    assert all(rec.empty((64, 768), np.float32).ctypes.data != addr for _ in range(3))
    assert keep


def test_threads_never_share_a_live_block():
    rec = arena.Recycler()
    live: list[np.ndarray] = []
    lock = threading.Lock()
    clash = []

    def work(tag: int) -> None:
        for _ in range(50):
            a = rec.empty(BIG, np.float32)
            a[0, 0] = tag
            with lock:
                if any(x.ctypes.data == a.ctypes.data for x in live):
                    clash.append(tag)
                live.append(a)
            assert a[0, 0] == tag
            with lock:
                live.remove(a)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not clash


@pytest.fixture(scope="module")
def lm_head_model(tmp_path_factory):
    """A one-MatMul ONNX model with a 256 x 20000 weight (20 MB): the compiled dense layer's
    result leaves the model."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import pytfrt

    rng = np.random.default_rng(3)
    w = (rng.standard_normal((256, 20000)) / 16).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "lm_head",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", 20000])],
        [numpy_helper.from_array(w, "w")])
    path = tmp_path_factory.mktemp("lm_head") / "lm_head.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return pytfrt.compile(str(path)), w


def test_model_results_are_fresh_and_never_clobbered(lm_head_model):
    model, w = lm_head_model
    rng = np.random.default_rng(4)
    held = []
    addrs = set()
    for seq in (64, 64, 64, 51, 64):
        x = rng.standard_normal((1, seq, 256)).astype(np.float32)
        y = model(x=x)
        want = x.astype(np.float64) @ w.astype(np.float64)
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
        addrs.add(y.ctypes.data)
        held.append((y, y.copy()))
    for y, copy in held:  # results the caller kept were not written again
        np.testing.assert_array_equal(y, copy)
    assert len(addrs) == len(held)
    del held, y
    x = rng.standard_normal((1, 64, 256)).astype(np.float32)
    first = model(x=x).ctypes.data  # dropped at once: the next call writes the same block
    assert model(x=x).ctypes.data == first
