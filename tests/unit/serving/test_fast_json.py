"""The compiled JSON fast path gives exactly the general path's array, or steps aside.

Oracle: ``json.loads`` + ``np.asarray`` + ``astype(float32)`` (what the general path does).
For every body, the fast path must return a bit-identical float32 array (same shape) or
``None``; for the bodies clients actually send (float32 tensors written by ``json.dumps``) it
must not step aside.  Bodies are padded with whitespace past the fast path's size threshold.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pytfrt.serving import fast_json
from pytfrt.serving.errors import ServingError
from pytfrt.serving.json_codec import COLUMNAR, ROW, decode_predict_request
from pytfrt.serving.signature import ServingSignature, TensorInfo

KERNELS = ["numba"] + (["c"] if fast_json.c_kernel() is not None else [])


@pytest.fixture(autouse=True, params=KERNELS)
def kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with each scan kernel: the C extension (when built) and Numba."""
    scan = fast_json.c_kernel() if request.param == "c" else fast_json._compile()
    monkeypatch.setattr(fast_json, "_kernel", scan)
    return str(request.param)


def test_the_c_kernel_is_used_when_built(kernel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fast_json, "_kernel", None)
    monkeypatch.setattr(fast_json, "_unavailable", False)
    monkeypatch.delenv(fast_json.KERNEL_ENV, raising=False)
    assert fast_json.kernel_name() == ("c" if "c" in KERNELS else "numba")
    monkeypatch.setattr(fast_json, "_kernel", None)
    monkeypatch.setenv(fast_json.KERNEL_ENV, "numba")
    assert fast_json.kernel_name() == "numba"


def pad(text: str) -> bytes:
    body = text.encode()
    head, _, tail = body.rpartition(b"}")
    return head + b" " * fast_json.MIN_BYTES + b"}" + tail


def oracle(body: bytes) -> np.ndarray:
    (value,) = json.loads(body).values()
    return np.asarray(value).astype(np.float32)


def check(body: bytes) -> np.ndarray | None:
    got = fast_json.parse_float32_tensor(body)
    if got is None:
        return None
    key, array = got
    want = oracle(body)
    assert key in ("instances", "inputs")
    assert array.dtype == np.float32 and array.shape == want.shape
    assert np.array_equal(array.view(np.uint32), want.view(np.uint32)), (array, want)
    return array


float32_arrays = hnp.arrays(
    np.float32, hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=5),
    elements=st.floats(width=32, allow_nan=False, allow_infinity=False))


@settings(max_examples=60)
@given(float32_arrays, st.sampled_from(["instances", "inputs"]))
def test_float32_tensors_take_the_fast_path(x: np.ndarray, key: str) -> None:
    body = pad(json.dumps({key: x.tolist()}))
    got = check(body)
    assert got is not None


decimals = st.one_of(
    st.integers(-10**20, 10**20).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.builds(lambda m, e: f"{m}e{e}", st.integers(-10**6, 10**6), st.integers(-40, 40)),
    st.builds(lambda a, b: f"{a}.{b}", st.integers(-999, 999), st.text("0123456789", min_size=1,
                                                                        max_size=20)),
)


@settings(max_examples=int(os.environ.get("FAST_JSON_EXAMPLES", "200")))
@given(st.lists(st.lists(decimals, min_size=2, max_size=2), min_size=1, max_size=6))
def test_any_decimal_is_exact_or_refused(rows: list[list[str]]) -> None:
    text = '{"instances": [' + ", ".join("[" + ", ".join(r) + "]" for r in rows) + "]}"
    check(pad(text))


@pytest.mark.parametrize("number", [
    "16777217",                  # 2**24 + 1: halfway between two float32s (ties to even)
    "16777217.000000001",        # its double is the midpoint: the general path rounds down
    "16777216.999999999",
    "-16777219",
    "1.00000005960464477",       # 1 + 2**-24 rounded to 18 digits
    "3.4028235677973366e38",     # halfway between the largest float32 and 2**128
    "3.4028234663852886e38",     # the largest float32
    "7.006492321624085e-46",     # half the smallest float32 subnormal
])
def test_float32_midpoints_are_exact_or_refused(number: str) -> None:
    check(pad('{"instances": [' + number + ', 1.5]}'))


def test_midpoints_are_refused_and_float32_values_are_not() -> None:
    assert fast_json.parse_float32_tensor(pad('{"instances": [16777217, 1.5]}')) is None
    assert check(pad('{"instances": [16777216, 16777218, 3.4028234663852886e38]}')) is not None


@pytest.mark.parametrize("text", [
    '{"instances": [[1, 2], [3]]}',            # ragged
    '{"instances": [[1, 2], 3]}',              # a number beside a list
    '{"instances": [1, [2]]}',
    '{"instances": [[1,, 2]]}',
    '{"instances": [[1, 2,]]}',
    '{"instances": [01]}',                     # not JSON
    '{"instances": [1.]}',
    '{"instances": [NaN, 1]}',
    '{"instances": [Infinity]}',
    '{"instances": ["1"]}',
    '{"instances": [true]}',
    '{"instances": [1], "signature_name": "x"}',
    '{"signature_name": "x", "instances": [1]}',
    '{"instances": {"x": [1]}}',
    '{"instances": [1e400]}',
    '{"instances": [12345678901234567890123]}',
    '{"instances": [[1, 2]',
])
def test_refused_bodies(text: str) -> None:
    assert fast_json.parse_float32_tensor(pad(text) if text.endswith("}") else
                                          text.encode() + b" " * fast_json.MIN_BYTES) is None


def test_small_bodies_take_the_general_path() -> None:
    assert fast_json.parse_float32_tensor(b'{"instances": [[1.5]]}') is None


def test_decode_uses_it_with_the_same_results_and_errors() -> None:
    x = np.random.default_rng(0).standard_normal((2, 64, 64, 3)).astype(np.float32)
    sig = ServingSignature((TensorInfo.of("image", np.float32, (None, 64, 64, 3)),),
                           (TensorInfo.of("y", np.float32, (None,)),))
    rows = decode_predict_request(json.dumps({"instances": x.tolist()}).encode(), sig)
    cols = decode_predict_request(json.dumps({"inputs": x.tolist()}).encode(), sig)
    assert rows.format == ROW and cols.format == COLUMNAR
    np.testing.assert_array_equal(rows.inputs["image"], x)
    np.testing.assert_array_equal(cols.inputs["image"], x)
    wrong = np.zeros((1, 64, 64, 4), np.float32)
    with pytest.raises(ServingError, match=r"expects shape \[\?,64,64,3\], got \[1,64,64,4\]"):
        decode_predict_request(json.dumps({"instances": wrong.tolist()}).encode(), sig)
    ragged = pad('{"instances": [[1.0, 2.0], [3.0]]}')
    with pytest.raises(ServingError, match="ragged"):
        decode_predict_request(ragged, sig)


# -- the two-halves scan (bodies of SPLIT_BYTES or more; ``split_at`` forces it in tests) -------


def oracle_or_none(body: bytes) -> np.ndarray | None:
    """The general path's float32 array, or ``None`` where it would not give one."""
    try:
        (value,) = json.loads(body).values()
        array = np.asarray(value)
    except (ValueError, json.JSONDecodeError):
        return None
    if array.dtype.kind not in "fiu" or array.ndim == 0:
        return None
    with np.errstate(over="ignore"):
        return array.astype(np.float32)


def check_split(body: bytes, cuts: list[int]) -> np.ndarray | None:
    """The scan in pieces cut at ``cuts``: bit-identical to the oracle, or ``None`` (never
    another array, never an exception)."""
    got = fast_json.parse_float32_tensor(body, split_at=cuts)
    if got is None:
        return None
    want = oracle_or_none(body)
    assert want is not None, body
    _, array = got
    assert array.dtype == np.float32 and array.shape == want.shape, (array.shape, want.shape)
    assert np.array_equal(array.view(np.uint32), want.view(np.uint32)), (array, want)
    return array


edge_numbers = st.sampled_from([
    "0", "-0", "0.0", "-0.0", "1e0", "1E+5", "-2.5e-3", "1e-45", "1.4e-45", "-1.17549435e-38",
    "3.4028234e38", "3.5e38", "1e39", "123456789012345678", "0.000000000000000000001",
    "16777217", "1.00000005960464477", "7", "-9.5", "12e-2",
])
numbers_text = st.one_of(decimals, edge_numbers)
spaces = st.sampled_from(["", " ", "\n", "  \t", "\r\n "])


def cut_lists(size: int) -> st.SearchStrategy[list[int]]:
    """One to four cut offsets into a body of ``size`` characters."""
    return st.lists(st.integers(0, size), min_size=1, max_size=4)


@st.composite
def tensor_texts(draw: st.DrawFn) -> str:
    """A nested list of numbers (usually rectangular, sometimes ragged) with random spacing."""
    shape = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
    ragged = draw(st.booleans()) and draw(st.booleans())

    def build(dims: list[int]) -> str:
        if not dims:
            return draw(numbers_text)
        n = dims[0] + (draw(st.integers(-1, 1)) if ragged else 0)
        items = [build(dims[1:]) for _ in range(max(n, 1))]
        sep = draw(spaces)
        return "[" + sep + ("," + sep).join(items) + draw(spaces) + "]"

    return '{"' + draw(st.sampled_from(["instances", "inputs"])) + '":' + draw(spaces) + \
        build(shape) + draw(spaces) + "}"


@settings(max_examples=int(os.environ.get("FAST_JSON_EXAMPLES", "200")))
@given(tensor_texts(), st.data())
def test_split_scan_is_exact_or_refused(text: str, data: st.DataObject) -> None:
    body = pad(text)
    check_split(body, data.draw(cut_lists(len(text))))


@settings(max_examples=int(os.environ.get("FAST_JSON_EXAMPLES", "200")))
@given(tensor_texts(), st.data())
def test_split_scan_on_malformed_bodies(text: str, data: st.DataObject) -> None:
    # Drop, double or replace one character of a well-formed body: the result is the general
    # path's array or None, whatever the cut.
    body = bytearray(pad(text))
    where = data.draw(st.integers(0, len(text) - 1))
    how = data.draw(st.sampled_from(["drop", "double", "replace"]))
    if how == "drop":
        del body[where]
    elif how == "double":
        body.insert(where, body[where])
    else:
        body[where] = ord(data.draw(st.sampled_from(list("[],-.e0 }x"))))
    check_split(bytes(body), data.draw(cut_lists(len(text))))


@settings(max_examples=40)
@given(float32_arrays.filter(lambda x: x.size > 1), st.sampled_from([None, 1, 2]))
def test_split_takes_float32_tensors_at_every_cut(x: np.ndarray, indent: int | None) -> None:
    # Every cut with a comma after it must give the array from the two halves, not from the
    # one-pass fallback.
    text = json.dumps({"instances": x.tolist()}, indent=indent)
    body = pad(text)
    whole = fast_json._whole
    try:
        fast_json._whole = None  # type: ignore[assignment]  # a fallback would raise: None
        for cut in range(text.index("["), text.rindex(",")):
            assert check_split(body, [cut]) is not None, cut
        for cuts in ([text.index(","), text.rindex(",") - 1], list(range(len(text)))):
            assert check_split(body, cuts) is not None, cuts
    finally:
        fast_json._whole = whole


def test_big_bodies_are_split_and_exact() -> None:
    x = np.random.default_rng(1).standard_normal((1, 64, 64, 24)).astype(np.float32)
    body = json.dumps({"instances": x.tolist()}).encode()
    assert len(body) >= fast_json.SPLIT_BYTES
    got = fast_json.parse_float32_tensor(body)
    assert got is not None
    assert np.array_equal(got[1].view(np.uint32), x.view(np.uint32))


def test_integer_minus_zero_is_positive_zero() -> None:
    # json.loads makes "-0" the int 0 (float32 +0.0), but "-0.0" and "-0e0" the float -0.0.
    got = check(pad('{"instances": [-0, -0.0, -0e0, 1.5]}'))
    assert got is not None
    assert list(np.signbit(got)) == [False, True, True, False]


@pytest.mark.parametrize("number", [
    "0.0012573022246360779",     # 17 significant digits after leading zeros: taken
    "-0.000000000000000000012573022246360779",
    "000.5",                     # not JSON
    "1234567890123456789",       # 19 significant digits: refused (the general path answers)
    "0.1234567890123456789",
    "99999999999999999999999",   # would wrap an int64 mantissa: refused, not wrong
])
def test_leading_zeros_do_not_count_as_digits(number: str) -> None:
    got = check(pad('{"instances": [' + number + ', 1.5]}'))
    if number.lstrip("-").startswith("0.0"):
        assert got is not None


def test_splitting_pauses_after_a_split_without_speedup(monkeypatch: pytest.MonkeyPatch) -> None:
    # A split whose pieces ran one after the other (CPU time == wall time) pauses splitting;
    # one that ran in parallel does not; the pause ends after SPLIT_PAUSE_SECONDS.
    clock = [1000.0]
    monkeypatch.setattr(fast_json.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(fast_json, "_split_paused_until", 0.0)
    fast_json._note_speedup(work=1.9, wall=1.0)
    assert fast_json.splitting()
    fast_json._note_speedup(work=1.0, wall=1.0)
    assert not fast_json.splitting()
    x = np.random.default_rng(2).standard_normal((1, 64, 64, 24)).astype(np.float32)
    body = json.dumps({"instances": x.tolist()}).encode()
    split = fast_json._split
    monkeypatch.setattr(fast_json, "_split", None)  # called while paused: TypeError -> None
    got = fast_json.parse_float32_tensor(body)
    assert got is not None and np.array_equal(got[1], x)  # one pass, same array
    clock[0] += fast_json.SPLIT_PAUSE_SECONDS
    assert fast_json.splitting()
    monkeypatch.setattr(fast_json, "_split", split)


# -- BodyScan: the body parsed in pieces while it arrives -----------------------------------------


def scan_in_chunks(body: bytes, sizes: list[int]) -> tuple[str, np.ndarray] | None:
    """``BodyScan`` fed ``body`` in chunks of the given sizes (cycled)."""
    scanner = fast_json.BodyScan(len(body), fast_json._scan())
    at, k = 0, 0
    while at < len(body):
        size = sizes[k % len(sizes)]
        scanner.feed(body[at:at + size])
        at, k = at + size, k + 1
    assert scanner.body() == body
    return scanner.result()


@settings(max_examples=int(os.environ.get("FAST_JSON_EXAMPLES", "200")), deadline=None)
@given(tensor_texts(), st.data())
def test_body_scan_gives_what_the_one_pass_scan_gives(text: str, data: st.DataObject) -> None:
    # Well-formed or with one byte dropped, doubled or replaced; tiny pieces and random chunks.
    body = bytearray(pad(text))
    if data.draw(st.booleans()):
        where = data.draw(st.integers(0, len(text) - 1))
        body[where] = ord(data.draw(st.sampled_from(list("[],-.e0 }x"))))
    sizes = data.draw(st.lists(st.integers(1, 200), min_size=1, max_size=5))
    piece = data.draw(st.integers(1, 64))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fast_json, "STREAM_PIECE_BYTES", piece)
        got = scan_in_chunks(bytes(body), sizes)
    reference = fast_json.parse_float32_tensor(bytes(body), split_at=[])  # one pass
    if reference is None:
        assert got is None
    else:
        assert got is not None and got[0] == reference[0]
        assert np.array_equal(got[1].view(np.uint32), reference[1].view(np.uint32))


def test_body_scan_of_a_big_body_uses_pieces() -> None:
    x = np.random.default_rng(4).standard_normal((1, 64, 64, 24)).astype(np.float32)
    body = json.dumps({"inputs": x.tolist()}).encode()
    scanner = fast_json.BodyScan.start(len(body))
    assert scanner is not None
    for at in range(0, len(body), 65536):
        scanner.feed(body[at:at + 65536])
    assert len(scanner._futures) >= 2
    got = scanner.result()
    assert got is not None and got[0] == "inputs"
    assert np.array_equal(got[1].view(np.uint32), x.view(np.uint32))
    with pytest.raises(ValueError, match="longer"):
        fast_json.BodyScan(3, fast_json._scan()).feed(b"[1,2]")
    assert fast_json.BodyScan.start(1000) is None  # small bodies: parse_float32_tensor


def test_body_scan_collects_other_bodies() -> None:
    body = pad('{"signature_name": "", "instances": [1.5, 2.5]}')
    assert scan_in_chunks(body, [7]) is None
    truncated = fast_json.BodyScan(len(body) + 5, fast_json._scan())
    truncated.feed(body)
    assert truncated.result() is None  # fewer bytes than announced


def test_warm_up_does_not_pause_splitting(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its own tiny split shows no speedup; that must not turn splitting off for a second.
    monkeypatch.setattr(fast_json, "_split_paused_until", 0.0)
    fast_json.warm_up()
    assert fast_json.splitting()


# -- the fast path accepts exactly what json.loads accepts -------------------------------------

odd_spaces = st.sampled_from(["", " ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1f", "\x00",
                              "\u00a0", "\u2028", "\ufeff"])


@st.composite
def spaced_bodies(draw: st.DrawFn) -> bytes:
    """A padded tensor body with one run of odd (and JSON) whitespace put anywhere: before the
    object, after it, or between any two characters."""
    body = pad(draw(tensor_texts()))
    where = draw(st.integers(0, len(body)))
    run = "".join(draw(st.lists(odd_spaces, min_size=1, max_size=3))).encode()
    return body[:where] + run + body[where:]


def json_loads_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return None


@settings(max_examples=int(os.environ.get("FAST_JSON_EXAMPLES", "60")), deadline=None)
@given(spaced_bodies(), st.data())
def test_fast_path_accepts_only_what_json_loads_accepts(body: bytes, data: st.DataObject) -> None:
    accepted = json_loads_or_none(body) is not None
    one_pass = fast_json.parse_float32_tensor(body, split_at=[])
    split = fast_json.parse_float32_tensor(body, split_at=data.draw(cut_lists(len(body))))
    streamed = scan_in_chunks(body, data.draw(st.lists(st.integers(1, 300), min_size=1,
                                                       max_size=3)))
    for got in (one_pass, split, streamed):
        if got is None:
            continue
        assert accepted, body  # never a tensor from a body json.loads refuses
        want = oracle_or_none(body)
        assert want is not None
        assert np.array_equal(got[1].view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("space", ["\x0b", "\x0c"])
@pytest.mark.parametrize("where", ["lead", "trail", "after_key"])
def test_vertical_tab_and_form_feed_are_not_json_whitespace(space: str, where: str) -> None:
    text = '{"instances": [' + ", ".join(["1.5"] * 400) + "]}"
    body = {"lead": space + text, "trail": text + space,
            "after_key": text.replace(":", ":" + space, 1)}[where].encode()
    with pytest.raises(json.JSONDecodeError):
        json.loads(body)
    assert fast_json.parse_float32_tensor(body) is None
    sig = ServingSignature((TensorInfo.of("x", np.float32, [None]),),
                           (TensorInfo.of("y", np.float32, [None]),))
    with pytest.raises(ServingError, match="JSON Parse error"):
        decode_predict_request(body, sig)
