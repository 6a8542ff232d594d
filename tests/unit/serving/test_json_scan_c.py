"""The C scan kernel (``pytfrt.serving._json_scan``) beyond the shared fast-path tests.

``test_fast_json.py`` runs every fast-path test with both kernels.  Here: what only the C
kernel does -- numbers whose float32 rounding the fast arithmetic cannot settle, or with over 19
digits, are converted exactly (CPython's conversion, as ``json.loads``) instead of refused;
the eight-digits-at-a-time reader at every digit count and next to the end of the buffer --
and its argument checks.  Oracle: ``json.loads`` + ``np.asarray`` + ``astype(float32)``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.serving import fast_json

scan = fast_json.c_kernel()
pytestmark = pytest.mark.skipif(scan is None, reason="the C extension is not built")


@pytest.fixture(autouse=True)
def c_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fast_json, "_kernel", scan)


def oracle(body: bytes) -> np.ndarray:
    (value,) = json.loads(body).values()
    with np.errstate(over="ignore"):
        return np.asarray(value).astype(np.float32)


def parse_exact(body: bytes, split_at: list[int] | None = None) -> np.ndarray:
    """The fast path's array, asserted taken (not refused) and bit-identical to the oracle."""
    got = fast_json.parse_float32_tensor(body, split_at=split_at)
    assert got is not None, body[:200]
    want = oracle(body)
    array = got[1]
    assert array.shape == want.shape
    assert np.array_equal(array.view(np.uint32), want.view(np.uint32)), (array, want)
    return array


def body_of(numbers: list[str], pad: bool = True) -> bytes:
    text = '{"instances": [' + ", ".join(numbers) + "]}"
    if pad:
        text = text[:-1] + " " * fast_json.MIN_BYTES + "}"
    return text.encode()


@pytest.mark.parametrize("number", [
    "16777217.000000001",          # its double is a float32 midpoint: rounds down to even
    "16777216.999999999",
    "1.00000005960464477",         # 1 + 2**-24 rounded to 18 digits
    "1.000000059604644775390625",  # 1 + 2**-24 exactly: a tie, to even
    "1.0000000596046447753906251",
    "3.4028234663852886e38",       # the largest float32
    "0.1234567890123456789012345678901234567890",
    "-0.000000000000000000000000000000000000000000001",   # 1e-45: a subnormal float32
    "7.006492321624085e-46",       # half the smallest subnormal: rounds to 0
    "7.0064923216240862e-46",      # just above: the smallest subnormal
    "1e-99999",                    # an exponent of five digits: 0
    "-1e-400",
    "1.5e+0000000000000000000002",
])
def test_unsettled_and_long_numbers_are_converted_exactly(number: str) -> None:
    parse_exact(body_of([number, "1.5"]))


@pytest.mark.parametrize("number", [
    "16777217",                    # an int at a float32 midpoint: int64 -> float32 rounds it
    "1234567890123456789",         # 19 digits: past int64 it would be uint64 or an object
    "99999999999999999999999",
    "1e39",                        # overflows float32
    "-3.5e38",
    "1e400",
])
def test_refused_numbers(number: str) -> None:
    assert fast_json.parse_float32_tensor(body_of([number, "1.5"])) is None


float_text = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.builds(lambda m, e: f"{m}e{e}", st.integers(-10**25, 10**25), st.integers(-60, 60)),
    st.builds(lambda a, b, e: f"{a}.{b}{e}", st.integers(-10**9, 10**9),
              st.text("0123456789", min_size=1, max_size=30),
              st.sampled_from(["", "e5", "E-7", "e+38", "e-45", "e-50", "E0"])),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(float_text, min_size=1, max_size=40))
def test_numbers_with_a_fraction_or_exponent_are_taken_unless_they_overflow(
        numbers: list[str]) -> None:
    body = body_of([n if ("." in n or "e" in n.lower()) else n + ".0" for n in numbers])
    with np.errstate(over="ignore"):
        finite = bool(np.isfinite(oracle(body)).all())
    got = fast_json.parse_float32_tensor(body)
    if not finite:
        assert got is None
    else:
        parse_exact(body)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 25), st.integers(0, 25), st.booleans(), st.integers(0, 9))
def test_every_digit_count_and_the_buffer_end(int_digits: int, frac_digits: int,
                                              negative: bool, seed: int) -> None:
    # Unpadded bodies: the last numbers end a few bytes before the buffer does, where the
    # reader must go byte by byte.
    rng = np.random.default_rng(seed)

    def number() -> str:
        head = str(rng.integers(1, 10)) + "".join(map(str, rng.integers(0, 10, int_digits - 1)))
        frac = "".join(map(str, rng.integers(0, 10, frac_digits)))
        return ("-" if negative else "") + head + ("." + frac if frac else ".5")

    count = fast_json.MIN_BYTES // (int_digits + frac_digits + 3) + 2
    body = body_of([number() for _ in range(count)], pad=False)
    assert len(body) >= fast_json.MIN_BYTES
    parse_exact(body)
    parse_exact(body, split_at=[len(body) // 3, len(body) - 12])


def test_a_float32_tensor_in_compact_json() -> None:
    x = np.random.default_rng(3).standard_normal((3, 17, 5)).astype(np.float32)
    body = json.dumps({"inputs": x.tolist()}, separators=(",", ":")).encode()
    assert np.array_equal(parse_exact(body), x)


def test_bad_arguments_raise_not_crash() -> None:
    assert scan is not None
    levels = 2 * fast_json.MAX_RANK + 1
    good = (np.full(levels, -1, np.int64), np.zeros(levels, np.int64),
            np.zeros(levels, np.int64), np.zeros(levels, np.bool_), np.empty(8, np.float32))
    buf = b"[1.5, 2]"
    assert scan(buf, 0, len(buf), False, None, *good)[:1] == (0,)
    with pytest.raises(TypeError, match="dims"):
        scan(buf, 0, len(buf), False, None, np.zeros(levels, np.int32), *good[1:])
    with pytest.raises(TypeError, match="out"):
        scan(buf, 0, len(buf), False, None, *good[:4], np.empty(8, np.float64))
    with pytest.raises(TypeError, match="inherited"):
        scan(buf, 0, len(buf), False, None, *good[:3], np.zeros(3, np.bool_), good[4])
    with pytest.raises(ValueError, match="outside"):
        scan(buf, 0, len(buf) + 1, False, None, *good)
    with pytest.raises(TypeError):
        scan(buf, 0, len(buf), False, None, *good[:4])


@st.composite
def mutated_bodies(draw: st.DrawFn) -> bytes:
    """A float32 tensor as json.dumps writes it (random shape and spacing), often with one byte
    dropped, doubled or replaced; long enough for the 64-byte blocks and 16-byte reads."""
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    x = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).standard_normal(shape)
    scale = draw(st.sampled_from([1.0, 1e-6, 1e6, 1e30, 1e-40]))
    items = draw(st.sampled_from([", ", ",", " , ", ",\n  "]))
    text = json.dumps({"instances": (x * scale).astype(np.float32).tolist()},
                      separators=(items, ": "))
    body = bytearray(text[:-1].encode() + b" " * 70 + b"}")
    if draw(st.booleans()):
        where = draw(st.integers(0, len(text) - 1))
        how = draw(st.sampled_from(["drop", "double", "replace"]))
        if how == "drop":
            del body[where]
        elif how == "double":
            body.insert(where, body[where])
        else:
            body[where] = ord(draw(st.sampled_from(list("[],-.eE+0 9}x{\""))))
    return bytes(body) + b" " * fast_json.MIN_BYTES


@settings(max_examples=400, deadline=None)
@given(mutated_bodies(), st.data())
def test_the_c_kernel_takes_what_numba_takes_and_agrees_with_json(body: bytes,
                                                                   data: st.DataObject) -> None:
    cuts = data.draw(st.none() | st.lists(st.integers(0, len(body)), min_size=1, max_size=3))
    got = fast_json.parse_float32_tensor(body, split_at=cuts)
    try:
        (value,) = json.loads(body).values()
        with np.errstate(over="ignore"):
            want: np.ndarray | None = np.asarray(value).astype(np.float32)
    except (ValueError, json.JSONDecodeError):
        want = None
    if got is not None:
        assert want is not None and got[1].shape == want.shape
        assert np.array_equal(got[1].view(np.uint32), want.view(np.uint32))
    fast_json._kernel = fast_json._compile()
    try:
        by_numba = fast_json.parse_float32_tensor(body, split_at=cuts)
    finally:
        fast_json._kernel = scan
    assert by_numba is None or got is not None


# -- the response: dumps_float32 against json.dumps ---------------------------------------------


def dumps_oracle(x: np.ndarray) -> bytes:
    return json.dumps(x.tolist(), separators=(",", ":")).encode()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=50))
def test_dumps_float32_matches_json_dumps_on_any_bits(words: list[int]) -> None:
    x = np.array(words, np.uint32).view(np.float32)  # NaN, infinities, subnormals included
    assert fast_json.dumps_float32(x) == dumps_oracle(x)


def test_dumps_float32_on_many_values_and_shapes() -> None:
    rng = np.random.default_rng(7)
    x = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    assert fast_json.dumps_float32(x) == dumps_oracle(x)
    for scale in (1.0, 1e-4, 1e-7, 1e7, 1e17, 1e30):
        y = (rng.standard_normal(20_000) * scale).astype(np.float32)
        assert fast_json.dumps_float32(y) == dumps_oracle(y)
    powers = np.ldexp(np.float32(1), np.arange(-149, 128)).astype(np.float32)  # lopsided
    assert fast_json.dumps_float32(powers) == dumps_oracle(powers)
    special = np.array([0.0, -0.0, 1.0, 0.5, 16777216.0, 3.4028235e38, 1e-45, 1e16, 1e17,
                        123456789.0, 0.1, 1e-5, 9.999999e-5], np.float32)
    assert fast_json.dumps_float32(special) == dumps_oracle(special)
    for shape in [(1,), (2, 3), (1, 2, 3, 1), (3, 1), (1, 1000)]:
        z = rng.standard_normal(shape).astype(np.float32)
        assert fast_json.dumps_float32(z) == dumps_oracle(z)
        assert fast_json.dumps_float32(np.asfortranarray(z)) == dumps_oracle(z)


def test_dumps_float32_steps_aside_for_other_arrays() -> None:
    assert fast_json.dumps_float32(np.zeros(3, np.float64)) is None
    assert fast_json.dumps_float32(np.zeros((2, 0), np.float32)) is None
    assert fast_json.dumps_float32(np.array(1.5, np.float32)) is None
    assert scan is not None
    from pytfrt.serving import _json_scan

    with pytest.raises(TypeError):
        _json_scan.dumps_float32(np.zeros(3, np.int32))
    with pytest.raises(TypeError):
        _json_scan.dumps_float32(np.zeros(0, np.float32))


def test_responses_are_the_bytes_json_dumps_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytfrt.serving.json_codec import COLUMNAR, ROW, encode_predict_response

    y = np.random.default_rng(1).standard_normal((2, 10)).astype(np.float32)
    outputs: list[dict[str, np.ndarray]] = [
        {"p": y}, {"p": y.astype(np.float64)}, {"p": y, "q": y[:, :3]},
        {"p": np.zeros((0, 3), np.float32)}, {"p": np.array(2.5, np.float32)}]
    for fmt in (ROW, COLUMNAR):
        for out in outputs:
            fast = encode_predict_response(fmt, out)
            with monkeypatch.context() as patch:
                patch.setattr(fast_json, "dumps_float32", lambda array: None)
                assert encode_predict_response(fmt, out) == fast
