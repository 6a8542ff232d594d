"""What the ONNX front end's modules share: limits, the element-type table, its error type.

:mod:`pytfrt.compiler.frontends.onnx` (the entry point, :func:`import_onnx`) and the per-op
mapping (:mod:`pytfrt.compiler.frontends.onnx_mapping`) both use these, so they sit below both.
Pure values and functions; thread-safe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import onnx

    from pytfrt.compiler.builder import FunctionBuilder, Value

MIN_OPSET = 13
"""The oldest default-domain opset imported as is; older models are upgraded first."""

FOLD_LIMIT = 1 << 22
"""Import-time evaluation is skipped for nodes whose known inputs exceed this many elements."""

_NO_FOLD = frozenset(
    {
        "RandomNormal",
        "RandomUniform",
        "RandomNormalLike",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
        "DequantizeLinear",  # quantised weights stay quantised (-tg-fold-quant reads them)
    }
)



class OnnxImportError(ValueError):
    """A model the ONNX front end cannot read (bad file, bad graph, too old an opset)."""


def tg_dtype(onnx_type: int, *, where: str = "") -> str:
    """The ``tg`` element type name of an ONNX ``TensorProto`` data type."""
    from pytfrt.compiler.frontends.onnx_proto import _ONNX_DTYPES

    try:
        return _ONNX_DTYPES[onnx_type]
    except KeyError:
        from pytfrt.compiler.errors import UnsupportedOpError
        from pytfrt.compiler.frontends.onnx_proto import TensorProto

        try:
            name = TensorProto.DataType.Name(onnx_type)
        except ValueError:
            name = str(onnx_type)
        supported = ", ".join(TensorProto.DataType.Name(t) for t in sorted(_ONNX_DTYPES))
        raise UnsupportedOpError(
            f"element type {name}", "", where.rstrip(": "), f"supported types: {supported}"
        ) from None


def _default_opset(model: onnx.ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


def materialize(fn: FunctionBuilder, array: np.ndarray, name: str) -> Value:
    """A ``tg.constant`` for ``array``: inline when small, else a weight named ``name``."""
    from pytfrt.compiler.builder import INLINE_LIMIT

    arr = np.asarray(array)
    if not arr.flags.c_contiguous:  # (np.ascontiguousarray would make a scalar 1-D)
        arr = arr.copy(order="C")
    return fn.constant(arr, name=name if arr.size > INLINE_LIMIT else None)


def initializer_array(init: Any, origin: str, base_dir: str = "") -> np.ndarray:
    """The array of initializer ``init``, its declared size checked first (a damaged file may
    declare terabytes); any failure is an :class:`OnnxImportError` naming the initializer.
    ``base_dir``: where external data lives (for a tensor whose data is not loaded yet)."""
    from pytfrt.compiler.frontends.onnx_proto import to_array

    n = 1
    for d in init.dims:
        n *= d
    if any(d < 0 for d in init.dims) or n > FOLD_LIMIT * 1024:
        raise OnnxImportError(
            f"{origin}: initializer {init.name!r} declares shape {list(init.dims)} "
            f"({n} elements): the file is damaged; export the model again")
    try:
        return to_array(init, base_dir)
    except Exception as exc:  # noqa: BLE001 - onnx/NumPy errors name no initializer
        raise OnnxImportError(
            f"{origin}: initializer {init.name!r} (shape {list(init.dims)}) cannot be read "
            f"({type(exc).__name__}: {str(exc)[:200]}): the file is damaged; export the model "
            "again") from None
