"""The table of CPU tensor-kernel records: what to call, with which inputs, against which oracle.

Each :class:`OpRecord` names a kernel family (``{t}`` = dtype suffix), the dtypes it is
registered for, a Hypothesis strategy for the operand shapes, how to build the kernel's
operands and attributes, where the result lands (an operand written in place, or the kernel's
new result tensor) and an independent NumPy (or naive-loop) reference.  ``test_cpu_kernels.py``
runs every record against its reference over random shapes and values.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from pytfrt.tensor import dtype as dt
from pytfrt.tensor.dense_host_tensor import DenseHostTensor
from pytfrt.tensor.dtype import DType
from pytfrt.tensor.shape import TensorShape

Shapes = tuple[tuple[int, ...], ...]

FLOATS = (dt.F32, dt.F64)
NUMERIC = (dt.F32, dt.F64, dt.I32, dt.I64)
WITH_F16 = (dt.F16, dt.F32, dt.F64, dt.I32, dt.I64)

dim = st.integers(1, 4)
small_shape = st.lists(dim, min_size=1, max_size=3).map(tuple)


def same(n: int) -> st.SearchStrategy[Shapes]:
    """``n`` copies of one random shape."""
    return small_shape.map(lambda s: (s,) * n)


def random_values(dtype: DType, shape: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    """Small random values of ``dtype`` (integers in [-4, 4], floats in [-3, 3])."""
    if dtype.kind in ("int", "uint"):
        return rng.integers(-4, 5, size=shape).astype(dtype.np_dtype)
    return rng.uniform(-3, 3, size=shape).astype(dtype.np_dtype)


@dataclass(frozen=True)
class OpRecord:
    """One kernel family under test."""

    name: str
    """Kernel name with ``{t}`` for the dtype suffix."""
    dtypes: tuple[DType, ...]
    shapes: st.SearchStrategy[Shapes]
    """Shapes of the tensor operands (inputs and output buffers)."""
    reference: Callable[..., np.ndarray]
    """NumPy oracle: input arrays (copies, before the call) -> expected result."""
    output: int | None
    """Index of the operand that receives the result, or ``None`` if the kernel returns it."""
    operands: Callable[[list[DenseHostTensor], DType], list[Any]] = lambda ts, d: list(ts)
    """Builds the kernel operands from the tensors (e.g. to insert scalars)."""
    attrs: list[Any] = field(default_factory=list)
    input_dtypes: Callable[[DType], Sequence[DType]] | None = None
    """Dtype of each tensor operand (default: all the record's dtype)."""
    values: Callable[[DType, Sequence[int], np.random.Generator], np.ndarray] = random_values
    rtol: float = 1e-5

    def kernel_name(self, dtype: DType) -> str:
        """The concrete kernel name for ``dtype``."""
        return self.name.format(t=dtype.mlir_name)

    def tolerance(self, dtype: DType) -> float:
        """Relative tolerance for ``dtype`` (exact for integers)."""
        if dtype.kind in ("int", "uint"):
            return 0.0
        return 2e-3 if dtype is dt.F16 else self.rtol


def _matmul_operands(ts: list[DenseHostTensor], d: DType) -> list[Any]:
    a, b, c = ts
    return [d.np_dtype.type(2), a, b, d.np_dtype.type(3), c]


def _matmul_shapes() -> st.SearchStrategy[Shapes]:
    return st.tuples(dim, dim, dim).map(lambda mkn: ((mkn[0], mkn[1]), (mkn[1], mkn[2]),
                                                     (mkn[0], mkn[2])))


def _naive_max_pool(x: np.ndarray, k: int, s: int) -> np.ndarray:
    n, h, w, c = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    out = np.full((n, oh, ow, c), np.finfo(np.float32).tiny, x.dtype)
    for b, i, j, ch in itertools.product(range(n), range(oh), range(ow), range(c)):
        for di, dj in itertools.product(range(k), range(k)):
            out[b, i, j, ch] = max(out[b, i, j, ch], x[b, i * s + di, j * s + dj, ch])
    return out


def _naive_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    n, h, wd, ci = x.shape
    kh, kw, _, co = w.shape
    out = np.zeros((n, h - kh + 1, wd - kw + 1, co), np.float64)
    for b, i, j, o in itertools.product(range(n), range(out.shape[1]), range(out.shape[2]),
                                        range(co)):
        acc = 0.0
        for di, dj, c in itertools.product(range(kh), range(kw), range(ci)):
            acc += float(x[b, i + di, j + dj, c]) * float(w[di, dj, c, o])
        out[b, i, j, o] = acc
    return out.astype(x.dtype)


def _pool_shapes() -> st.SearchStrategy[Shapes]:
    return st.tuples(dim, st.integers(2, 7), st.integers(2, 7), dim).map(
        lambda s: (s, (s[0], (s[1] - 2) // 2 + 1, (s[2] - 2) // 2 + 1, s[3]))
    )


def _conv_shapes() -> st.SearchStrategy[Shapes]:
    return st.tuples(dim, st.integers(2, 5), st.integers(2, 5), dim, st.integers(1, 2),
                     st.integers(1, 2), dim).map(
        lambda s: ((s[0], s[1], s[2], s[3]), (s[4], s[5], s[3], s[6]),
                   (s[0], s[1] - s[4] + 1, s[2] - s[5] + 1, s[6]))
    )


def _positive(d: DType, shape: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(0.5, 2.0, size=shape).astype(d.np_dtype)


OP_RECORDS: tuple[OpRecord, ...] = (
    OpRecord("tfrt_test.add.{t}", WITH_F16, same(3), lambda a, b, c: a + b, 2),
    OpRecord("tfrt_test.add_inplace.{t}", WITH_F16, same(2), lambda a, b: a + b, 1),
    OpRecord(
        "tfrt_test.equal.{t}", NUMERIC, same(3),
        lambda a, b, c: (a == b).astype(a.dtype), 2,
        values=lambda d, s, rng: rng.integers(0, 2, size=s).astype(d.np_dtype),
    ),
    OpRecord(
        "tfrt_test.equal_inplace.{t}", NUMERIC, same(2),
        lambda a, b: (a == b).astype(a.dtype), 1,
        values=lambda d, s, rng: rng.integers(0, 2, size=s).astype(d.np_dtype),
    ),
    OpRecord("tfrt_test.relu.{t}", WITH_F16, same(2), lambda a, b: np.maximum(a, 0), 1),
    OpRecord("tfrt_test.relu_inplace.{t}", WITH_F16, same(1), lambda a: np.maximum(a, 0), 0),
    OpRecord(
        "tfrt_test.relu_grad_inplace.{t}", NUMERIC, same(2),
        lambda a, g: np.where(a > 0, g, 0).astype(g.dtype), 1,
    ),
    OpRecord("tfrt_test.subtract_inplace.{t}", NUMERIC, same(2), lambda a, b: b - a, 1),
    OpRecord(
        "tfrt_test.flatten.{t}", NUMERIC,
        st.tuples(dim, dim, dim).map(lambda s: (s, (s[0], s[1] * s[2]))),
        lambda a, b: a.reshape(b.shape), 1,
    ),
    OpRecord(
        "tfrt_test.tensor_transpose.{t}", FLOATS,
        st.tuples(dim, dim).map(lambda s: (s, (s[1], s[0]))), lambda a, b: a.T, 1,
    ),
    OpRecord(
        "tfrt_test.mean_axis_zero.{t}", FLOATS,
        st.tuples(dim, dim).map(lambda s: (s, (s[1],))), lambda a, b: a.mean(axis=0), 1,
    ),
    OpRecord(
        "tfrt_test.softmax_inplace.{t}", FLOATS, same(1),
        lambda a: np.exp(a) / np.exp(a).sum(axis=-1, keepdims=True), 0,
    ),
    OpRecord(
        "tfrt_test.gradient_descent.{t}", FLOATS,
        small_shape.map(lambda s: (s, (1,), s)), lambda g, lr, o: o - g * lr[0], 2,
    ),
    OpRecord(
        "tfrt_test.argmax.{t}.2", NUMERIC, st.tuples(dim, dim).map(lambda s: (s,)),
        lambda a: np.argmax(a, axis=1).astype(np.int32), None,
    ),
    OpRecord(
        "tfrt_test.reduce_mean.{t}.1", FLOATS, st.tuples(dim).map(lambda s: (s,)),
        lambda a: np.asarray(a.mean(), a.dtype), None,
    ),
    OpRecord(
        "eigen.matmul.{t}", NUMERIC, _matmul_shapes(),
        lambda a, b, c: 2 * (a @ b) + 3 * c, 2, operands=_matmul_operands,
    ),
    OpRecord(
        "tfrt_test.matmul.{t}.2", NUMERIC, _matmul_shapes(),
        lambda a, b, c: 2 * (a @ b) + 3 * c, 2, operands=_matmul_operands,
    ),
    OpRecord(
        "tfrt_test.broadcast.{t}.2", WITH_F16,
        st.tuples(dim, dim).map(lambda s: ((s[1],),)),
        lambda b: np.tile(b, (3, 1)), None,
        operands=lambda ts, d: [ts[0], TensorShape((3, ts[0].array.shape[0]))],
    ),
    OpRecord(
        "tfrt_test.cast.i32_to_f32", (dt.F32,), same(2),
        lambda a, b: a.astype(np.float32), 1, input_dtypes=lambda d: (dt.I32, dt.F32),
    ),
    OpRecord(
        "tfrt_test.max_pooling_2d.{t}", (dt.F32,), _pool_shapes(),
        lambda x, o: _naive_max_pool(x, 2, 2), 1, attrs=["valid", (2, 2), (2, 2)],
    ),
    OpRecord(
        "eigen.conv2d.{t}", (dt.F32,), _conv_shapes(),
        lambda x, w, o: _naive_conv(x, w), 2, attrs=["valid", (1, 1)], rtol=1e-4,
    ),
    OpRecord(
        "eigen.batch_norm.{t}", (dt.F32,),
        st.tuples(dim, dim, dim, dim).map(lambda s: (s,) + ((s[3],),) * 4),
        lambda x, sc, of, m, v: (x - m) * sc / np.sqrt(v + np.float32(1e-5)) + of, 0,
        attrs=[1e-5], values=_positive, rtol=1e-4,
    ),
    OpRecord(
        "eigen.zero_padding.{t}", (dt.F32,),
        st.tuples(dim, dim, dim, dim).map(lambda s: (s, (s[0], s[1] + 2, s[2] + 4, s[3]))),
        lambda x, o: np.pad(x, ((0, 0), (1, 1), (2, 2), (0, 0))), 1, attrs=[(1, 2)],
    ),
    OpRecord(
        "tfrt_test.global_average_pooling.{t}", (dt.F32,),
        st.tuples(dim, dim, dim, dim).map(lambda s: (s, (s[0], s[3]))),
        lambda x, o: x.mean(axis=(1, 2)), 1,
    ),
)
"""Every CPU tensor-kernel family under test."""


def record_cases() -> list[tuple[OpRecord, DType]]:
    """(record, dtype) pairs for parametrisation."""
    return [(r, d) for r in OP_RECORDS for d in r.dtypes]
