"""Complex tensors in TF graphs, imported as pairs of real tensors (Keras' ``MelSpectrogram``).

The graph dialect has no complex element type, so a complex TF tensor becomes a :class:`TV`
whose :attr:`~.tf_values.TV.parts` is ``(real, imaginary)``: two real tensors of the same
shape. Such a value is never an operand of a tg op itself (using one as a tensor raises
``ConversionError``): the converters here and :func:`convert_complex` take it apart.

* ``RFFT`` is a real DFT: the signal (cropped or zero-padded to ``fft_length``) times a cosine
  and a sine matrix (``N x (N/2 + 1)``, computed in float64 at import): two ``matmul``s;
  ``IRFFT`` the inverse, using the Hermitian symmetry TF assumes (the imaginary parts of the
  DC and Nyquist bins are ignored, as TF ignores them); 1-D transforms only;
* ``Real``, ``Imag``, ``Complex`` and ``ComplexAbs`` pick or pair the parts;
* every other op with a complex operand (what TF's ``RFFT`` gradient builds) goes through
  :func:`convert_complex`: the linear and structural ops (``AddV2``, ``Sub``, ``AddN``,
  ``Neg``, ``StridedSlice``, ``Reshape``...) run their ordinary converter on each part,
  ``Mul`` multiplies out the parts, ``RealDiv``/``DivNoNan`` divide by the squared magnitude,
  ``Cast`` to a complex type pairs the value with zeros.
  The shape ops (``Shape``, ``Size``...) read the real part. Any other op on a complex
  value is refused (``UnsupportedOpError`` naming it).

Thread-safety: as the rest of the importer (one import per thread).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytfrt.compiler.frontends.tf_registry import TF_OPS, tf_op
from pytfrt.compiler.frontends.tf_values import TV, ConversionError, attr, tf_dtype_name, tg_to_np

_COMPLEX_TYPES = {8: "f32", 18: "f64"}  # TF DataType enum: DT_COMPLEX64, DT_COMPLEX128

# ops whose converter is linear in each data operand: applied to the real parts, then the
# imaginary parts (the integer operands -- indices, shapes, axes -- are passed to both)
_PER_PART = frozenset({
    "AddV2", "Add", "Sub", "AddN", "Neg", "Identity", "StopGradient", "Snapshot",
    "StridedSlice", "Slice", "Reshape", "ExpandDims", "Squeeze", "Transpose", "Tile",
    "ConcatV2", "Pack", "GatherV2", "Pad", "ZerosLike", "Sum", "Mean", "Fill", "BroadcastTo",
    "ReverseV2", "Split", "SplitV", "Unpack",
})


SHAPE_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank"})
"""Ops that read only their operands' shapes: the importer gives them the real parts."""


def _not_a_tensor() -> Any:
    raise ConversionError("complex tensors are supported only by the ops of docs/ops.md's "
                          "complex-number table (the graph dialect has no complex type)")


def complex_tv(re: TV, im: TV) -> TV:
    """The complex value ``re + i*im`` (the parts must have the same static shape)."""
    tv = TV(thunk=_not_a_tensor, dtype="complex", shape=re.shape)
    tv.parts = (re, im)
    return tv


def _zeros_like(cx: Any, x: TV) -> TV:
    if x.const is not None:
        return TV(const=np.zeros_like(x.const))
    shape = cx.op("shape", [x], out_type="i64")
    return cx.op("fill", [shape, cx.scalar(0, x.dtype)])


def _const_parts(x: TV) -> tuple[TV, TV] | None:
    if x.const is not None and np.iscomplexobj(x.const):
        c = np.asarray(x.const)
        real = np.float64 if c.dtype == np.complex128 else np.float32
        return TV(const=c.real.astype(real)), TV(const=c.imag.astype(real))
    return None


def involved(node: Any, ins: list[TV]) -> bool:
    """True if ``node`` has a complex operand, or is a ``Cast`` to a complex type (then
    :func:`convert_complex` translates it instead of its ordinary converter)."""
    if any(tv.parts is not None or _const_parts(tv) is not None for tv in ins):
        return True
    return node.op == "Cast" and attr(node, "DstT") in _COMPLEX_TYPES


def real_part(tv: TV) -> TV:
    """``tv``'s real part if it is complex, else ``tv``."""
    p = _parts(tv)
    return tv if p is None else p[0]


def _parts(tv: TV) -> tuple[TV, TV] | None:
    return tv.parts if tv.parts is not None else _const_parts(tv)


def _both_complex(cx: Any, ins: list[TV], split: list[Any]) -> list[tuple[TV, TV]]:
    """The parts of each operand of a binary op (a real one paired with zeros)."""
    return [p if p is not None else (tv, _zeros_like(cx, tv))
            for p, tv in zip(split, ins, strict=True)]


def convert_complex(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    """Translate ``node``, which has a complex operand (or casts to a complex type).

    Raises:
        ConversionError: the op is not one that can run on the parts.
    """
    if node.op in TF_OPS and TF_OPS[node.op].family == "tf_complex":
        return TF_OPS[node.op].convert(cx, node, ins)
    split = [_parts(tv) for tv in ins]
    if node.op == "Cast":
        x, p = ins[0], split[0]
        dst = attr(node, "DstT")
        if dst in _COMPLEX_TYPES:
            real = _COMPLEX_TYPES[dst]
            if p is None:
                re = TV(const=x.const.astype(tg_to_np(real))) if x.const is not None else (
                    x if x.dtype == real else cx.op("cast", [x], to=real))
                return [complex_tv(re, _zeros_like(cx, re))]
            return [complex_tv(*(cx.op("cast", [q], to=real) if q.dtype != real else q
                                 for q in p))]
        if p is None:
            raise ConversionError("a cast of a complex operand without its parts")
        want = tf_dtype_name(dst)
        return [p[0] if p[0].dtype == want else cx.op("cast", [p[0]], to=want)]
    if node.op == "Mul":
        a, b = _both_complex(cx, ins, split)
        re = cx.op("sub", [cx.op("mul", [a[0], b[0]]), cx.op("mul", [a[1], b[1]])])
        im = cx.op("add", [cx.op("mul", [a[0], b[1]]), cx.op("mul", [a[1], b[0]])])
        return [complex_tv(re, im)]
    if node.op in ("RealDiv", "DivNoNan", "Div"):
        # (a + bi) / (c + di) = ((ac + bd) + (bc - ad) i) / (c^2 + d^2), by the real op
        # (DivNoNan: 0 where c^2 + d^2 is 0)
        a, b = _both_complex(cx, ins, split)
        den = cx.op("add", [cx.op("mul", [b[0], b[0]]), cx.op("mul", [b[1], b[1]])])
        re = cx.op("add", [cx.op("mul", [a[0], b[0]]), cx.op("mul", [a[1], b[1]])])
        im = cx.op("sub", [cx.op("mul", [a[1], b[0]]), cx.op("mul", [a[0], b[1]])])
        div = TF_OPS[node.op].convert
        return [complex_tv(div(cx, node, [re, den])[0], div(cx, node, [im, den])[0])]
    if node.op in _PER_PART:
        convert = TF_OPS[node.op].convert
        halves = []
        for k in range(2):
            halves.append(convert(cx, node, [tv if p is None else p[k]
                                             for tv, p in zip(ins, split, strict=True)]))
        return [complex_tv(re, im) for re, im in zip(*halves, strict=True)]
    raise ConversionError(f"{node.op} of complex tensors is not supported (complex values are "
                          "held as pairs of real tensors; see docs/ops.md)")


def _fft_length(cx: Any, tv: TV) -> int:
    (n,) = cx.ints(tv, "fft_length")
    if n < 1:
        raise ConversionError(f"fft_length must be >= 1, got {n}")
    return n


def _dft_matrices(n_in: int, n: int, inverse: bool) -> tuple[np.ndarray, np.ndarray]:
    """The real DFT of length ``n`` as two matrices (float64).

    Forward: ``[n_in, n//2+1]`` cosines and negated sines (rows past ``n`` are zero: TF
    crops the signal to ``n``; a shorter signal is zero-padded, the missing rows). Inverse:
    ``[n_in, n]`` for ``n_in`` bins (bins past ``n//2`` ignored, missing ones zero), each bin
    weighted by its count in the full spectrum and ``1/n``."""
    bins = n // 2 + 1
    if not inverse:
        t = np.arange(min(n_in, n))[:, None]
        k = np.arange(bins)[None, :]
        ang = 2.0 * np.pi * ((t * k) % n) / n
        cos = np.zeros((n_in, bins))
        sin = np.zeros((n_in, bins))
        cos[: t.shape[0]] = np.cos(ang)
        sin[: t.shape[0]] = -np.sin(ang)
        return cos, sin
    k = np.arange(min(n_in, bins))[:, None]
    t = np.arange(n)[None, :]
    ang = 2.0 * np.pi * ((k * t) % n) / n
    weight = np.full((k.shape[0], 1), 2.0)
    weight[0] = 1.0
    if n % 2 == 0 and k.shape[0] > n // 2:
        weight[n // 2] = 1.0
    cos = np.zeros((n_in, n))
    sin = np.zeros((n_in, n))
    cos[: k.shape[0]] = weight * np.cos(ang) / n
    sin[: k.shape[0]] = -weight * np.sin(ang) / n
    return cos, sin


def _last_dim(x: TV) -> int:
    if x.shape is None or not x.shape or x.shape[-1] is None:
        raise ConversionError("the transformed (last) dimension must be static")
    return int(x.shape[-1])


def _times(cx: Any, x: TV, matrix: np.ndarray) -> TV:
    return cx.op("matmul", [x, TV(const=matrix.astype(np.float32 if x.dtype == "f32"
                                                      else np.float64))])


@tf_op("RFFT", tg="`matmul` x 2", note="1-D; a real DFT: cosine and sine matrices, float64 at "
       "import; a complex result is a pair of real tensors")
def _rfft(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, length = ins
    if x.parts is not None:
        raise ConversionError("the signal must be real")
    n = _fft_length(cx, length)
    cos, sin = _dft_matrices(_last_dim(x), n, inverse=False)
    return [complex_tv(_times(cx, x, cos), _times(cx, x, sin))]


@tf_op("IRFFT", tg="`matmul` x 2, `add`", note="1-D; the inverse real DFT as matrices (the "
       "imaginary parts of the DC and Nyquist bins ignored, as TF does)")
def _irfft(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    z, length = ins
    p = _parts(z)
    if p is None:
        raise ConversionError("the spectrum must be complex")
    n = _fft_length(cx, length)
    cos, sin = _dft_matrices(_last_dim(p[0]), n, inverse=True)
    return [cx.op("add", [_times(cx, p[0], cos), _times(cx, p[1], sin)])]


def _complex_operand(tv: TV) -> tuple[TV, TV]:
    p = _parts(tv)
    if p is None:
        raise ConversionError("the operand must be complex")
    return p


@tf_op("Real", tg="(none)", note="the real part")
def _real(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [_complex_operand(ins[0])[0]]


@tf_op("Imag", tg="(none)", note="the imaginary part")
def _imag(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [_complex_operand(ins[0])[1]]


@tf_op("ComplexAbs", tg="`mul`, `add`, `sqrt`", note="`sqrt(re**2 + im**2)`")
def _complex_abs(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    re, im = _complex_operand(ins[0])
    sq = cx.op("add", [cx.op("mul", [re, re]), cx.op("mul", [im, im])])
    return [cx.op("sqrt", [sq])]


@tf_op("Complex", tg="(none)", note="pairs the parts (broadcast to one shape)")
def _complex(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    re, im = ins
    if re.shape != im.shape:  # TF broadcasts the two; the parts must have one shape
        re, im = (cx.op("add", [a, _zeros_like(cx, b)]) for a, b in ((re, im), (im, re)))
    return [complex_tv(re, im)]


@tf_op("Conj", tg="`neg`", note="the imaginary part negated (a real operand unchanged)")
def _conj(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    p = _parts(ins[0])
    if p is None:
        return [ins[0]]
    return [complex_tv(p[0], cx.op("neg", [p[1]]))]
