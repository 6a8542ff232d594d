"""The JSON mapping of ``:predict`` against NumPy: random tensors survive a request round trip.

Oracles: NumPy itself (the array a request was written from) and Python's ``json`` module
(``tolist()`` + ``json.dumps`` is how a client writes a tensor).  Hypothesis draws dtypes,
shapes (with a dynamic batch dimension) and values, including NaN and infinities for floats.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pytfrt.serving.errors import ServingError
from pytfrt.serving.json_codec import (
    COLUMNAR,
    ROW,
    decode_predict_request,
    encode_predict_response,
)
from pytfrt.serving.signature import ServingSignature, TensorInfo, signature_def_json

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.int8, np.bool_]


def _sig(*inputs: TensorInfo) -> ServingSignature:
    return ServingSignature(tuple(inputs), (TensorInfo.of("y", np.float32, (None,)),))


@st.composite
def tensors(draw: Any) -> np.ndarray:
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    elements = None
    if dtype.kind == "f":
        elements = st.floats(width=dtype.itemsize * 8, allow_nan=True, allow_infinity=True)
    return draw(hnp.arrays(dtype, shape, elements=elements))


@given(tensors(), st.booleans())
def test_a_tensor_survives_both_request_formats(x: np.ndarray, columnar: bool) -> None:
    info = TensorInfo.of("x", x.dtype, (None, *x.shape[1:]))
    key = "inputs" if columnar else "instances"
    request = decode_predict_request(json.dumps({key: x.tolist()}).encode(), _sig(info))
    assert request.format == (COLUMNAR if columnar else ROW)
    got = request.inputs["x"]
    assert got.dtype == x.dtype and got.shape == x.shape
    np.testing.assert_array_equal(got, x)  # NaN == NaN here


@given(tensors())
def test_a_tensor_survives_the_response(y: np.ndarray) -> None:
    for fmt, key in ((ROW, "predictions"), (COLUMNAR, "outputs")):
        body = json.loads(encode_predict_response(fmt, {"y": y}))
        back = np.array(body[key], dtype=y.dtype)
        np.testing.assert_array_equal(back, y)


def test_row_objects_with_several_outputs_split_by_row() -> None:
    outputs = {"a": np.arange(6, dtype=np.int32).reshape(3, 2), "b": np.array([1.5, 2.5, 3.5])}
    body = json.loads(encode_predict_response(ROW, outputs))
    assert body == {"predictions": [{"a": [0, 1], "b": 1.5}, {"a": [2, 3], "b": 2.5},
                                    {"a": [4, 5], "b": 3.5}]}
    body = json.loads(encode_predict_response(COLUMNAR, outputs))
    assert body == {"outputs": {"a": [[0, 1], [2, 3], [4, 5]], "b": [1.5, 2.5, 3.5]}}


def test_row_format_needs_outputs_of_one_batch_size() -> None:
    outputs = {"a": np.zeros((3, 2)), "b": np.zeros(2)}
    with pytest.raises(ServingError, match="do not share their 0-th dimension"):
        encode_predict_response(ROW, outputs)


def test_strings_utf8_and_b64() -> None:
    info = TensorInfo.of("s", object, (None, 2))
    raw = [[b"\xff\x00", "é".encode()], [b"", b"b64 \x01"]]
    instances = [[{"b64": base64.b64encode(b).decode()} for b in row] for row in raw]
    request = decode_predict_request(json.dumps({"instances": instances}).encode(), _sig(info))
    assert request.inputs["s"].tolist() == raw
    text = decode_predict_request(b'{"inputs": [["a", "\\u00e9"]]}', _sig(info))
    assert text.inputs["s"].tolist() == [[b"a", "é".encode()]]
    out = {"name_bytes": request.inputs["s"]}
    body = json.loads(encode_predict_response(COLUMNAR, out))
    assert [[base64.b64decode(v["b64"]) for v in row] for row in body["outputs"]] == raw
    with pytest.raises(ServingError, match="not UTF-8"):
        encode_predict_response(COLUMNAR, {"name": request.inputs["s"]})


@pytest.mark.parametrize("info,body,words", [
    (TensorInfo.of("x", np.int64, (None,)), '{"instances": [1, 2.5]}', "integers"),
    (TensorInfo.of("x", np.uint8, (None,)), '{"instances": [1, 256]}', "out of range"),
    (TensorInfo.of("x", np.uint8, (None,)), '{"instances": [-1]}', "out of range"),
    (TensorInfo.of("x", np.bool_, (None,)), '{"instances": [1, 0]}', "true/false"),
    (TensorInfo.of("x", np.float32, (None, 2)), '{"instances": [[1, 2], [3]]}', "ragged"),
    (TensorInfo.of("x", np.float32, (None, 2)), '{"instances": [[1, 2], [3, "a"]]}',
     "DT_FLOAT"),
    (TensorInfo.of("x", np.float32, (None, 2)), '{"instances": [[1, 2, 3]]}',
     "expects shape [?,2], got [1,3]"),
    (TensorInfo.of("x", np.float32, (None, 2)), '{"instances": [1, 2]}',
     "expects shape [?,2], got [2]"),
    (TensorInfo.of("x", np.float32, (None,)), '{"instances": []}', "is empty"),
    (TensorInfo.of("x", np.float32, (None,)), '{"instances": 3}', "must be a list"),
    (TensorInfo.of("x", np.float32, (None,)), '{"instances": [{"x": 1}, 2]}', "mixes"),
    (TensorInfo.of("x", np.float32, (None,)), '{"instances": [1], "extra": 1}',
     "unknown key 'extra'"),
    (TensorInfo.of("x", np.float32, (None,)), '{"signature_name": 3, "instances": [1]}',
     "must be a string"),
    (TensorInfo.of("s", object, (None,)), '{"instances": [["a"], "b"]}', "ragged"),
    (TensorInfo.of("s", object, (None,)), '{"instances": [{"b64": "!!"}]}', "base64"),
    (TensorInfo.of("s", object, (None,)), '{"instances": [true]}', "DT_STRING"),
    (TensorInfo.of("x", np.float32, (None,)), '{"instances": [1]', "JSON Parse error"),
    (TensorInfo.of("x", np.float32, (None,)), b'\xff\xfe', "JSON Parse error"),
])
def test_invalid_requests(info: TensorInfo, body: str | bytes, words: str) -> None:
    data = body.encode() if isinstance(body, str) else body
    with pytest.raises(ServingError) as exc:
        decode_predict_request(data, _sig(info))
    assert words in exc.value.message
    assert exc.value.http_status == 400


def test_unknown_rank_accepts_any_shape() -> None:
    info = TensorInfo.of("x", np.float32, None)
    request = decode_predict_request(b'{"inputs": [[[1]], [[2]]]}', _sig(info))
    assert request.inputs["x"].shape == (2, 1, 1)


def test_signature_def_json_of_unknown_rank_and_strings() -> None:
    sig = ServingSignature((TensorInfo.of("s", object, None),),
                           (TensorInfo.of("n", np.int64, (None, 3)),))
    body = signature_def_json(sig)["signature_def"]["signature_def"]["serving_default"]
    assert body["inputs"]["s"] == {"dtype": "DT_STRING",
                                   "tensor_shape": {"dim": [], "unknown_rank": True},
                                   "name": "s:0"}
    assert body["outputs"]["n"]["dtype"] == "DT_INT64"
