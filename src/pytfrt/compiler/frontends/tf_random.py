"""TF's stateless random ops -> ``random_key_counter`` / ``random_uniform`` (Philox, bit for bit).

Keras 3 draws dropout masks with ``tf.random.stateless_uniform``: a seed pair (from the layer's
seed-generator variable) becomes a Philox key and counter (``StatelessRandomGetKeyCounter``),
then uniform floats (``StatelessRandomUniformV2``). pytfrt computes the same bits as TF's CPU
kernels, so a compiled training step with dropout follows TF's exactly. Philox only (TF's CPU
choice for the default algorithm); f32 only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytfrt.compiler.frontends.tf_registry import tf_op
from pytfrt.compiler.frontends.tf_values import TV, ConversionError, attr, tf_dtype_name

PHILOX = 1
AUTO_SELECT = 3
"""TF's ``Algorithm`` enum values that mean Philox on CPU."""


def _hint(tv: TV) -> list[int]:
    dims = tv.known_vector()
    return [] if dims is None else [-1 if d is None else int(d) for d in dims]


def _check_alg(tv: TV) -> None:
    if tv.const is None or int(np.asarray(tv.const).reshape(-1)[0]) not in (PHILOX, AUTO_SELECT):
        raise ConversionError("only the Philox algorithm (constant alg 1 or 3) is supported")


def _uniform(
    cx: Any, node: Any, shape: TV, key: TV, counter: TV, op: str = "random_uniform"
) -> TV:
    dtype = tf_dtype_name(attr(node, "dtype", 1))
    if dtype != "f32":
        raise ConversionError(f"random {dtype} values are not supported (f32 only)")
    return cx.op(op, [cx.as_i64(shape), key, counter], dtype=dtype, static_shape=_hint(shape))


@tf_op("StatelessRandomGetAlg", tg="(constant 1: Philox)")
def _get_alg(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [cx.scalar(PHILOX, "i32")]


@tf_op("StatelessRandomGetKeyCounter", tg="`random_key_counter`", note="Philox")
def _get_key_counter(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return cx.ops("random_key_counter", ins, 2)


@tf_op("StatelessRandomUniformV2", tg="`random_uniform`", note="Philox, f32; same bits as TF")
def _uniform_v2(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    shape, key, counter, alg = ins
    _check_alg(alg)
    return [_uniform(cx, node, shape, key, counter)]


@tf_op("StatelessRandomUniform", tg="`random_key_counter`, `random_uniform`", note="Philox, f32")
def _uniform_v1(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    shape, seed = ins
    key, counter = cx.ops("random_key_counter", [seed], 2)
    return [_uniform(cx, node, shape, key, counter)]


@tf_op(
    "StatelessRandomNormalV2",
    tg="`random_normal`",
    note="Philox, f32; TF's Box-Muller on the same bits (f32 rounding of sin/cos/log aside)",
)
def _normal_v2(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    shape, key, counter, alg = ins
    _check_alg(alg)
    return [_uniform(cx, node, shape, key, counter, "random_normal")]


@tf_op("StatelessRandomUniformIntV2", tg="`random_uniform_int`",
       note="Philox, i32/i64; same bits as TF")
def _uniform_int_v2(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    shape, key, counter, alg, lo, hi = ins
    _check_alg(alg)
    dtype = tf_dtype_name(attr(node, "dtype", 3))
    if dtype not in ("i32", "i64"):
        raise ConversionError(f"random {dtype} integers are not supported (i32, i64)")
    return [cx.op("random_uniform_int", [cx.as_i64(shape), key, counter, lo, hi], dtype=dtype,
                  static_shape=_hint(shape))]


@tf_op(
    "StatelessRandomGammaV3",
    tg="`random_gamma`",
    note="Philox, f32/f64; TF's Marsaglia-Tsang sampler on the same bits (Keras' `MixUp`, "
    "`CutMix`, `AugMix`)",
)
def _gamma_v3(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    shape, key, counter, alg, alpha = ins
    _check_alg(alg)
    dtype = tf_dtype_name(attr(node, "dtype", 1))
    return [cx.op("random_gamma", [cx.as_i64(shape), key, counter, alpha], dtype=dtype,
                  static_shape=_hint(shape))]
