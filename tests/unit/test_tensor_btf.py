"""BTF files: round trips, every read error, and the ``btf.read_dense_tensor`` kernels."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tensor_harness import run

from pytfrt.tensor import dtype as dt
from pytfrt.tensor.btf import BTF_DTYPES, BtfError, encode_btf, read_dense_tensor, write_btf

NP_TYPES = [d.np_dtype for d in BTF_DTYPES]


@given(
    arrays=st.lists(
        st.sampled_from(NP_TYPES).flatmap(
            lambda t: hnp.arrays(t, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0,
                                                     max_side=3))
        ),
        min_size=1,
        max_size=4,
    )
)
def test_round_trip(arrays: list[np.ndarray], tmp_path_factory: pytest.TempPathFactory) -> None:
    path = tmp_path_factory.mktemp("btf") / "t.btf"
    write_btf(path, arrays)
    for i, a in enumerate(arrays):
        t = read_dense_tensor(path, i, dt.dtype_from_numpy(a.dtype), a.ndim)
        assert t.dtype.np_dtype == a.dtype
        np.testing.assert_array_equal(t.array, a)


def test_layout_matches_the_spec(tmp_path: Path) -> None:
    data = encode_btf([np.array([[1, 2], [3, 4]], np.int32)])
    count, offset = struct.unpack_from("<QQ", data, 0)
    assert (count, offset) == (1, 16)
    rank, code, layout = struct.unpack_from("<QBB", data, 16)
    assert (rank, code, layout) == (2, 2, 0)
    assert data[26:32] == b"\0" * 6
    assert struct.unpack_from("<QQ", data, 32) == (2, 2)
    assert np.frombuffer(data[48:], np.int32).tolist() == [1, 2, 3, 4]


def test_errors(tmp_path: Path) -> None:
    path = tmp_path / "x.btf"
    write_btf(path, [np.array([1.0], np.float32)])
    with pytest.raises(BtfError, match=r"^failed to open file /tmp/invalid_path_x for reading$"):
        read_dense_tensor("/tmp/invalid_path_x", 0)
    with pytest.raises(
        BtfError,
        match=rf"^invalid tensor index 3 to read tensor from path {path} which contains 1 tensors$",
    ):
        read_dense_tensor(path, 3)
    with pytest.raises(BtfError, match=r"^unexpected tensor dtype f32. Expected dtype is i32$"):
        read_dense_tensor(path, 0, dt.I32)
    with pytest.raises(BtfError, match=r"^unexpected tensor rank 1. Expected rank is 2$"):
        read_dense_tensor(path, 0, dt.F32, 2)
    raw = bytearray(path.read_bytes())
    raw[16 + 9] = 1  # layout byte -> COO
    coo = tmp_path / "coo.btf"
    coo.write_bytes(bytes(raw))
    with pytest.raises(BtfError, match=r"^unexpected tensor layout 1$"):
        read_dense_tensor(coo, 0)
    trunc = tmp_path / "trunc.btf"
    trunc.write_bytes(path.read_bytes()[:-2])
    with pytest.raises(BtfError, match="failed to read the data"):
        read_dense_tensor(trunc, 0)


def test_read_kernel_and_emitted_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the host's default data directory is the working directory
    path = tmp_path / "k.btf"
    write_btf(path, [np.array([[1, 2], [3, 4]], np.int32), np.arange(5, dtype=np.int32),
                     np.zeros(0, np.int32)])
    out = run("btf.read_dense_tensor.i32.2", [str(path), 0], chain=False)
    assert out.diagnostics == []
    assert str(out.value()) == "DenseHostTensor dtype = i32, shape = [2, 2], values = [1, 2, 3, 4]"
    out = run("btf.read_dense_tensor.i32.1", ["k.btf", 2], chain=False)
    assert str(out.value()).endswith("shape = [0], values = []")
    missing = str(tmp_path / "invalid_path")
    bad = run("btf.read_dense_tensor.i32.2", [missing, 0], chain=False)
    assert bad.diagnostics == [f"failed to open file {missing} for reading"]
    assert bad.error() == f"failed to open file {missing} for reading"
    outside = run("btf.read_dense_tensor.i32.2", ["/tmp/invalid_path", 0], chain=False)
    assert outside.error() == (
        "failed to open file /tmp/invalid_path for reading: the file is not under a data "
        "directory (allow its directory with bef_executor --data_dir)"
    )
    wrong = run("btf.read_dense_tensor.f32.2", [str(path), 0], chain=False)
    assert wrong.diagnostics == ["unexpected tensor dtype i32. Expected dtype is f32"]


def test_committed_lit_input_is_readable() -> None:
    path = Path(__file__).resolve().parents[1] / "lit" / "tensor" / "Inputs" / "test_tensor.btf"
    t0 = read_dense_tensor(path, 0, dt.I32, 2)
    assert t0.array.tolist() == [[1, 2], [3, 4]]
    assert read_dense_tensor(path, 2, dt.I32, 1).array.shape == (0,)
