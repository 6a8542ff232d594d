"""DType: TFRT's tensor element types, their BEF codes, printed names and NumPy dtypes.

Every TFRT dtype is one immutable :class:`DType` singleton (compare with ``is`` or ``==``):

======  ==========  ====  ==================  =================================
name    MLIR name   code  NumPy dtype         notes
======  ==========  ====  ==================  =================================
u8      ui8         1     uint8
u16     ui16        2     uint16
u32     ui32        3     uint32
u64     ui64        4     uint64
i1      i1          5     bool_               printed 0/1; kernel suffix also ``bool``
i8      i8          6     int8
i16     i16         7     int16
i32     i32         8     int32
i64     i64         9     int64
f32     f32         10    float32             printed ``%e``
f64     f64         11    float64             printed ``%e``
complex64  complex64  12  complex64           printed ``(<re>,<im>)``
complex128 complex128 13  complex128
f16     f16         14    float16             printed ``fp16(<bits>)``
bf16    bf16        15    ml_dtypes.bfloat16  printed ``bf16(<bits>)``
str     string      16    object (Python str) string tensors only
resource            17    object
variant             18    object
qu8     qui8        19    uint8               quantized: storage type only
qu16    qui16       20    uint16
qi8     qi8         21    int8
qi16    qi16        22    int16
qi32    qi32        23    int32
======  ==========  ====  ==================  =================================

NumPy is imported when a dtype's ``np_dtype`` is first read (not when this module is imported),
so a process whose tensors use plain buffers (``DenseHostTensor``'s NumPy-free storage,
docs/host.md) never loads it; ``typecode`` is the :mod:`array` module's code of the element type
(``f`` for f32; ``None`` for types :mod:`array` has no code for).

``name`` is what TFRT prints (``DenseHostTensor dtype = f32``); ``mlir_name`` is the MLIR type
spelling used in kernel-name suffixes and attributes (``tfrt_dht.fill_tensor_with_constant.f32``).
Look-ups: :func:`dtype_from_name` (either spelling, plus ``bool``), :func:`dtype_from_code`,
:func:`dtype_from_numpy` (non-quantized types only).  All objects are immutable and thread-safe.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import numpy as np


class DType:
    """One TFRT element type (a singleton per type; see the module table)."""

    __slots__ = ("name", "mlir_name", "code", "np_dtype", "kind", "_np_name", "_itemsize",
                 "typecode", "__weakref__")

    def __init__(self, name: str, mlir_name: str, code: int, np_name: str, kind: str,
                 itemsize: int = 0, typecode: str | None = None) -> None:
        self.name: str = name
        """Printed name (``f32``, ``u8``, ``str``, ``qi8``)."""
        self.mlir_name: str = mlir_name
        """MLIR type spelling (``f32``, ``ui8``, ``string``, ``qi8``)."""
        self.code: int = code
        """BEF DType code (docs/bef.md)."""
        self._np_name = np_name
        self._itemsize = itemsize
        self.typecode: str | None = typecode
        """The :mod:`array` module's type code of the element type, or ``None``."""
        self.kind: str = kind
        """One of ``int``, ``uint``, ``bool``, ``float``, ``complex``, ``string``, ``quant``,
        ``opaque``."""

    # ``np_dtype`` (the NumPy storage dtype) is a slot filled on first read: a missing slot
    # attribute falls through to ``__getattr__``, which imports NumPy and fills it, so later
    # reads cost a plain attribute access.
    if TYPE_CHECKING:
        np_dtype: np.dtype[Any]

    def __getattr__(self, attr: str) -> Any:
        if attr != "np_dtype":
            raise AttributeError(attr)
        import numpy

        value = numpy.dtype(self._np_name)
        self.np_dtype = value
        return value

    @property
    def itemsize(self) -> int:
        """Bytes per element in a host buffer (0 for string/opaque types)."""
        return self._itemsize

    @property
    def is_float(self) -> bool:
        """True for f16, bf16, f32, f64."""
        return self.kind == "float"

    @property
    def is_integer(self) -> bool:
        """True for signed/unsigned integer types (not i1, not quantized)."""
        return self.kind in ("int", "uint")

    def __repr__(self) -> str:
        return f"DType({self.name})"

    def __str__(self) -> str:
        return self.name

    def __reduce__(self) -> tuple[Any, ...]:
        return (dtype_from_code, (self.code,))


UI8: Final = DType("u8", "ui8", 1, "uint8", "uint", 1, "B")
UI16: Final = DType("u16", "ui16", 2, "uint16", "uint", 2, "H")
UI32: Final = DType("u32", "ui32", 3, "uint32", "uint", 4, "I")
UI64: Final = DType("u64", "ui64", 4, "uint64", "uint", 8, "Q")
I1: Final = DType("i1", "i1", 5, "bool", "bool", 1)
I8: Final = DType("i8", "i8", 6, "int8", "int", 1, "b")
I16: Final = DType("i16", "i16", 7, "int16", "int", 2, "h")
I32: Final = DType("i32", "i32", 8, "int32", "int", 4, "i")
I64: Final = DType("i64", "i64", 9, "int64", "int", 8, "q")
F32: Final = DType("f32", "f32", 10, "float32", "float", 4, "f")
F64: Final = DType("f64", "f64", 11, "float64", "float", 8, "d")
COMPLEX64: Final = DType("complex64", "complex64", 12, "complex64", "complex", 8)
COMPLEX128: Final = DType("complex128", "complex128", 13, "complex128", "complex", 16)
F16: Final = DType("f16", "f16", 14, "float16", "float", 2)


class _LazyDType(DType):
    """A dtype whose NumPy dtype comes from a package imported on first use (``bf16``:
    ``ml_dtypes``, whose import costs a program that never names the type)."""

    __slots__ = ("_resolve", "_resolved")

    def __init__(self, name: str, mlir_name: str, code: int, resolve: Any, kind: str) -> None:
        super().__init__(name, mlir_name, code, "void", kind, 2)
        self._resolve = resolve
        self._resolved: np.dtype[Any] | None = None

    @property  # type: ignore[override]
    def np_dtype(self) -> np.dtype[Any]:
        """NumPy storage dtype (imports its package on first use)."""
        if self._resolved is None:
            import numpy

            self._resolved = numpy.dtype(self._resolve())
            _by_numpy()[self._resolved] = self
        return self._resolved

    @np_dtype.setter
    def np_dtype(self, _value: Any) -> None:  # resolved by the property only
        pass


def _bfloat16() -> Any:
    import ml_dtypes

    return ml_dtypes.bfloat16


BF16: Final = _LazyDType("bf16", "bf16", 15, _bfloat16, "float")
STRING: Final = DType("str", "string", 16, "object", "string", 0)
RESOURCE: Final = DType("resource", "resource", 17, "object", "opaque", 0)
VARIANT: Final = DType("variant", "variant", 18, "object", "opaque", 0)
QUI8: Final = DType("qu8", "qui8", 19, "uint8", "quant", 1)
QUI16: Final = DType("qu16", "qui16", 20, "uint16", "quant", 2)
QI8: Final = DType("qi8", "qi8", 21, "int8", "quant", 1)
QI16: Final = DType("qi16", "qi16", 22, "int16", "quant", 2)
QI32: Final = DType("qi32", "qi32", 23, "int32", "quant", 4)

ALL_DTYPES: Final[tuple[DType, ...]] = (
    UI8, UI16, UI32, UI64, I1, I8, I16, I32, I64, F32, F64, COMPLEX64, COMPLEX128, F16, BF16,
    STRING, RESOURCE, VARIANT, QUI8, QUI16, QI8, QI16, QI32,
)
"""Every dtype, in code order (1..23)."""

NUMERIC_DTYPES: Final[tuple[DType, ...]] = (
    UI8, UI16, UI32, UI64, I1, I8, I16, I32, I64, F16, BF16, F32, F64, COMPLEX64, COMPLEX128,
)
"""The dtypes a DenseHostTensor kernel family is registered for."""

_BY_CODE: Final = {d.code: d for d in ALL_DTYPES}
_BY_NAME: dict[str, DType] = {}
for _d in ALL_DTYPES:
    _BY_NAME[_d.name] = _d
    _BY_NAME[_d.mlir_name] = _d
_BY_NAME["bool"] = I1
_BY_NAME["ui1"] = I1
_BY_NAME["quint8"] = QUI8
_BY_NAME["quint16"] = QUI16
_BY_NAME["qint8"] = QI8
_BY_NAME["qint16"] = QI16
_BY_NAME["qint32"] = QI32

_BY_NUMPY: dict[Any, DType] = {}
"""Look-up by NumPy dtype (filled on first use, when NumPy is needed anyway); a lazily resolved
dtype adds itself when first resolved."""
_to_np_dtype: Any = None  # numpy.dtype, once _BY_NUMPY is filled


def _by_numpy() -> dict[Any, DType]:
    global _to_np_dtype
    if not _BY_NUMPY:
        import numpy

        _to_np_dtype = numpy.dtype
        _BY_NUMPY.update(
            (d.np_dtype, d) for d in ALL_DTYPES
            if d.kind not in ("quant", "opaque", "string") and not isinstance(d, _LazyDType))
    return _BY_NUMPY


class DTypeError(ValueError):
    """An unknown dtype name, code or NumPy dtype."""


def dtype_from_name(name: str) -> DType:
    """The dtype printed or spelled ``name`` (``f32``, ``ui8``/``u8``, ``bool``/``i1``, ...).

    Raises:
        DTypeError: for an unknown name.
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise DTypeError(f"unknown dtype '{name}'") from None


def np_dtype(name: str) -> np.dtype:
    """The NumPy dtype of an element type name (``string``: NumPy's object dtype).

    Raises:
        DTypeError: for an unknown name.
    """
    import numpy

    if name == "string":
        return numpy.dtype(object)
    return numpy.dtype(dtype_from_name(name).np_dtype)


def dtype_from_code(code: int) -> DType:
    """The dtype with BEF code ``code`` (1..23).

    Raises:
        DTypeError: for an unknown code.
    """
    try:
        return _BY_CODE[code]
    except KeyError:
        raise DTypeError(f"unknown dtype code {code}") from None


def dtype_from_numpy(np_dtype: Any) -> DType:
    """The (non-quantized) dtype whose storage is ``np_dtype``.

    Raises:
        DTypeError: for a NumPy dtype TFRT has no type for (e.g. ``uint16`` is fine, ``<U5`` is
            not).
    """
    table = _BY_NUMPY or _by_numpy()
    try:
        return table[_to_np_dtype(np_dtype)]
    except (KeyError, TypeError):
        pass
    if "ml_dtypes" in sys.modules and BF16._resolved is None:
        # a bfloat16 array exists only once ml_dtypes is imported: resolve bf16, look again
        _ = BF16.np_dtype
        try:
            return table[_to_np_dtype(np_dtype)]
        except (KeyError, TypeError):
            pass
    raise DTypeError(f"no TFRT dtype for NumPy dtype {np_dtype!r}") from None
