"""Saved model directories as untrusted input: confined, bounded, verified loading.

Each case of the adversarial pass over ``pytfrt.load`` is a regression test here: paths that
escape the directory, links, FIFOs and devices, size bombs, malformed manifests and weights,
flipped bytes (caught by the SHA-256 digests, and by the attribute ranges when digests are
not checked) and outputs that do not fit the signature.  The oracle for a model that loads is
the original model's output on the same input.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytfrt
from pytfrt import model as model_mod
from pytfrt.model import ModelError

X = np.random.default_rng(3).standard_normal((3, 5, 5, 2)).astype(np.float32)
PADS = struct.pack("<4q", 0, 1, 0, 1)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    """A small conv + dense model (conv pads [0, 1, 0, 1]) saved once, and its output on X."""
    from pytfrt.compiler import GraphBuilder
    from pytfrt.compiler.api import compile_module

    rng = np.random.default_rng(11)
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("image", (None, 5, 5, 2), "f32")])
    (x,) = fn.arguments
    w = rng.standard_normal((2, 2, 2, 3)).astype(np.float32)
    h = fn.op("conv2d", [x, fn.constant(w, name="conv/w")], layout="NHWC", pads=[0, 1, 0, 1])
    h = fn.op("reduce_mean", [fn.op("relu", [h])], axes=[1, 2])
    wd = rng.standard_normal((3, 4)).astype(np.float32)
    fn.returns([fn.op("matmul", [h, fn.constant(wd, name="dense/w")])], names=["y"])
    model = compile_module(gb.finish())
    d = tmp_path_factory.mktemp("model") / "m"
    model.save(d)
    return d, model(X)


def _copy(saved: tuple[Path, np.ndarray], tmp_path: Path) -> Path:
    d = tmp_path / "m"
    shutil.copytree(saved[0], d)
    return d


def _manifest(d: Path) -> dict[str, Any]:
    return json.loads((d / "manifest.json").read_text())


def _write(d: Path, manifest: Any) -> None:
    (d / "manifest.json").write_text(json.dumps(manifest))


def _load_soon(d: Path, **kw: Any) -> Any:
    """``pytfrt.load(d)`` on a thread that must finish within 20 s (a FIFO must not hang)."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(pytfrt.load(d, **kw))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "load hung"
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def test_round_trip_verifies_digests(saved: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    d = _copy(saved, tmp_path)
    assert set(_manifest(d)["sha256"]) == {"program", "weights_file"}
    np.testing.assert_array_equal(pytfrt.load(d)(X), saved[1])


def test_model_saved_without_digests_loads(saved: tuple[Path, np.ndarray],
                                          tmp_path: Path) -> None:
    d = _copy(saved, tmp_path)
    m = _manifest(d)
    del m["sha256"]
    _write(d, m)
    np.testing.assert_array_equal(pytfrt.load(d)(X), saved[1])


@pytest.mark.parametrize("field", ["program", "weights_file"])
@pytest.mark.parametrize("value", ["/etc/passwd", "../m/model.bef", "sub/model.bef", "a\0b",
                                   "..", "", 7])
def test_paths_must_name_files_in_the_directory(saved: tuple[Path, np.ndarray], tmp_path: Path,
                                                field: str, value: Any) -> None:
    d = _copy(saved, tmp_path)
    m = _manifest(d)
    m[field] = value
    _write(d, m)
    with pytest.raises(ModelError, match=f"field '{field}'") as info:
        pytfrt.load(d)
    assert str(tmp_path) not in str(info.value)


@pytest.mark.parametrize("target", ["/dev/zero", "/etc/passwd", "inside"])
def test_symlinks_are_refused(saved: tuple[Path, np.ndarray], tmp_path: Path,
                              target: str) -> None:
    d = _copy(saved, tmp_path)
    if target == "inside":
        os.rename(d / "model.bef", d / "real.bef")
        target = "real.bef"
    else:
        (d / "model.bef").unlink()
    os.symlink(target, d / "model.bef")
    with pytest.raises(ModelError, match="program .* is a symbolic link") as info:
        pytfrt.load(d)
    assert target not in str(info.value)


@pytest.mark.parametrize("name", ["manifest.json", "model.bef", "weights.btf"])
def test_fifos_fail_at_once(saved: tuple[Path, np.ndarray], tmp_path: Path, name: str) -> None:
    d = _copy(saved, tmp_path)
    (d / name).unlink()
    os.mkfifo(d / name)
    with pytest.raises(ModelError, match="not a regular file"):
        _load_soon(d)


def test_directory_as_program(saved: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    d = _copy(saved, tmp_path)
    (d / "model.bef").unlink()
    (d / "model.bef").mkdir()
    with pytest.raises(ModelError, match="program .* is not a regular file"):
        pytfrt.load(d)


def test_sizes_are_capped(saved: tuple[Path, np.ndarray], tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    d = _copy(saved, tmp_path)
    size = (d / "model.bef").stat().st_size
    monkeypatch.setattr(model_mod, "MAX_PROGRAM_BYTES", size - 1)
    with pytest.raises(ModelError, match=f"program .* is {size} bytes, more than the limit"):
        pytfrt.load(d)
    monkeypatch.undo()
    with open(d / "weights.btf", "r+b") as fh:  # a sparse 8 GiB size bomb: refused unread
        fh.truncate(2**33)
    with pytest.raises(ModelError, match="weights_file .* more than what the manifest's "
                                         "weights need"):
        _load_soon(d)
    monkeypatch.setattr(model_mod, "MAX_MANIFEST_BYTES", 10)
    with pytest.raises(ModelError, match="manifest.json .* more than the limit"):
        pytfrt.load(d)


def _edit(m: dict[str, Any], case: str) -> None:
    sig = m["signature"]
    if case == "dims overflow":
        m["weights"][0]["shape"] = [2**40, 2**40, 2**40]
    elif case == "negative dim":
        m["weights"][0]["shape"] = [-1, 2, 2, 3]
    elif case == "float dim":
        sig["inputs"][0]["shape"][1] = 5.5
    elif case == "num_resources 0":
        m["num_resources"] = 0
    elif case == "num_resources -1":
        m["num_resources"] = -1
    elif case == "num_resources str":
        m["num_resources"] = "2"
    elif case == "extra input":
        sig["inputs"].append(dict(sig["inputs"][0], name="extra"))
    elif case == "extra output":
        sig["outputs"].append(dict(sig["outputs"][0], name="extra"))
    elif case in ("object", "V3", "U1", "<U5", ">f4", "float128", "datetime64"):
        sig["inputs"][0]["dtype"] = "O" if case == "object" else case
    elif case == "weight dtype V3":
        m["weights"][0]["dtype"] = "V3"
    elif case == "weight dtype float64":
        m["weights"][0]["dtype"] = "float64"
    elif case == "unknown variable":
        m["variables"] = ["nope"]
    elif case == "variables not a list":
        m["variables"] = {"a": 1}
    elif case == "empty outputs":
        sig["outputs"] = []
    elif case == "structure":
        sig["structure"] = "set"
    elif case == "single with two":
        sig["structure"] = "single"
        sig["outputs"].append(dict(sig["outputs"][0], name="two"))
    elif case == "weights not a list":
        m["weights"] = "x"
    elif case == "missing weight":
        m["weights"].pop()
    elif case == "signature null":
        m["signature"] = None
    elif case == "sha256 bad":
        m["sha256"] = {"program": "00"}
    elif case == "duplicate input":
        sig["inputs"].append(dict(sig["inputs"][0]))


CASES = ["dims overflow", "negative dim", "float dim", "num_resources 0", "num_resources -1",
         "num_resources str", "extra input", "extra output", "object", "V3", "U1", "<U5",
         ">f4", "float128", "datetime64", "weight dtype V3", "weight dtype float64",
         "unknown variable", "variables not a list", "empty outputs", "structure",
         "single with two", "weights not a list", "missing weight", "signature null",
         "sha256 bad", "duplicate input"]


@pytest.mark.parametrize("case", CASES)
def test_malformed_manifest_is_a_model_error(saved: tuple[Path, np.ndarray], tmp_path: Path,
                                             case: str) -> None:
    d = _copy(saved, tmp_path)
    m = _manifest(d)
    _edit(m, case)
    _write(d, m)
    with pytest.raises(ModelError):
        pytfrt.load(d)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1"
                                  + "}" * 100_000, "\xff\xfe", "null", "[]", "1e999999"])
def test_malformed_manifest_json(saved: tuple[Path, np.ndarray], tmp_path: Path,
                                 text: str) -> None:
    d = _copy(saved, tmp_path)
    (d / "manifest.json").write_bytes(text.encode("latin-1"))
    with pytest.raises(ModelError, match="manifest.json"):
        pytfrt.load(d)


def test_flipped_pads_byte_is_refused(saved: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    """One flipped byte turned pads [0, 1, 0, 1] into [34304, 1, 0, 1] and the model returned
    zeros of shape (51459, 4): the digest catches it, and so do the declared ranges."""
    d = _copy(saved, tmp_path)
    data = bytearray((d / "model.bef").read_bytes())
    at = data.index(PADS)
    data[at + 1] = 0x86  # 0x8600 = 34304
    (d / "model.bef").write_bytes(bytes(data))
    with pytest.raises(ModelError, match="does not match its SHA-256"):
        pytfrt.load(d)
    with pytest.raises(ModelError, match=r"tg\.conv2d.*'pads' = \[34304, 1, 0, 1\] is out of "
                                         r"range"):
        pytfrt.load(d, verify=False)


def test_outputs_are_checked_against_the_signature(saved: tuple[Path, np.ndarray],
                                                   tmp_path: Path) -> None:
    d = _copy(saved, tmp_path)
    for shape, dtype in (([None, 5], "<f4"), ([None, 4], "<f8"), ([None, 4, 1], "<f4"),
                         ([3, 4], "<f4")):
        m = _manifest(d)
        m["signature"]["outputs"][0].update(shape=shape, dtype=dtype)
        _write(d, m)
        model = pytfrt.load(d)
        if shape == [3, 4]:  # fits this batch
            np.testing.assert_array_equal(model(X), saved[1])
            continue
        with pytest.raises(ModelError, match=r"output 0 \('y'\) is float32\[3, 4\], the "
                                             "signature says"):
            model(X)


# -- Hypothesis: random damage is a clean ModelError or the original answer ---------------

def _outcome(d: Path, expected: np.ndarray, **kw: Any) -> str:
    try:
        model = pytfrt.load(d, **kw)
    except ModelError:
        return "error"
    try:
        y = model(X)
    except (ModelError, pytfrt.model.InputError):
        return "error"
    values = list(y.values()) if isinstance(y, dict) else (
        list(y) if isinstance(y, tuple | list) else [y])
    same = len(values) == 1 and np.array_equal(values[0], expected)
    return "same" if same else "different"


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(file=st.sampled_from(["model.bef", "weights.btf"]), data=st.data())
def test_damaged_files(saved: tuple[Path, np.ndarray], tmp_path_factory: pytest.TempPathFactory,
                       file: str, data: st.DataObject) -> None:
    d = tmp_path_factory.mktemp("dmg") / "m"
    shutil.copytree(saved[0], d)
    raw = bytearray((d / file).read_bytes())
    kind = data.draw(st.sampled_from(["flip", "truncate"]))
    if kind == "flip":
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= data.draw(st.integers(1, 255))
    else:
        del raw[data.draw(st.integers(0, len(raw) - 1)):]
    (d / file).write_bytes(bytes(raw))
    assert _outcome(d, saved[1]) == "error"  # the digest
    # without the digest: never a traceback or a hang (a changed weight may change the answer)
    _outcome(d, saved[1], verify=False)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=3), max_leaves=8)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_manifest(saved: tuple[Path, np.ndarray],
                          tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    d = tmp_path_factory.mktemp("man") / "m"
    shutil.copytree(saved[0], d)
    m = _manifest(d)
    path = data.draw(st.sampled_from(_paths(m)[1:]))
    parent = m
    for key in path[:-1]:
        parent = parent[key]
    if data.draw(st.booleans()):
        parent[path[-1]] = data.draw(JSON_VALUES)
    elif isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent.pop(path[-1])
    _write(d, m)
    # names may change and harmless fields may go: the answer is the same array or an error
    assert _outcome(d, saved[1]) in ("error", "same")
