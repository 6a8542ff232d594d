"""Type stub of the optional C extension ``pytfrt._eager_fast`` (source: ``_eager_fast.c``).

The eager fast path in C (``docs/eager.md``): op objects that run the float32/float64 ufunc case
of an eager op directly and hand every other call to the Python op function they wrap.
"""

from collections.abc import Callable
from typing import Any

import numpy as np

def configure(
    tensor_type: type,
    ndarray_type: type,
    f32: np.dtype,
    f64: np.dtype,
    f32_type: type,
    f64_type: type,
    asarray: Callable[[Any], np.ndarray],
    device: str,
    counts: Any,
    weak_floats: bool = False,
    read_struct: bool = True,
    /,
) -> bool:
    """Tell the extension the classes and objects it works with (``pytfrt.eager`` calls it once).

    Returns whether an array's dtype is read from NumPy's array struct (``read_struct`` and its
    layout checked on two arrays first) rather than as the ``.dtype`` attribute.

    Raises:
        TypeError: the Tensor class or the counts object lacks the expected ``__slots__``.
    """

class op:  # noqa: N801 - a C type
    """An eager op made by :func:`binary` or :func:`unary` (a method descriptor too)."""

    fn: Callable[..., Any]
    fallback: Callable[..., Any]
    nargs: int
    swapped: int
    __wrapped__: Callable[..., Any]

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __get__(self, obj: Any, owner: Any = None) -> Any: ...

def binary(fn: Callable[..., Any], fallback: Callable[..., Any], swapped: bool = False) -> op:
    """A two-operand op: float32/float64 Tensors or ndarrays of one dtype (or one of them and a
    Python float/int) -> ``fn(x, y)`` as a new Tensor; any other call -> ``fallback(*args)``.
    ``swapped``: computes ``fn(y, x)`` (a reflected operator such as ``Tensor.__radd__``)."""

def unary(fn: Callable[..., Any], fallback: Callable[..., Any]) -> op:
    """A one-operand op: a float32/float64 Tensor or ndarray -> ``fn(x)`` as a new Tensor
    (``fn`` returning ``None`` declines); any other call -> ``fallback(*args)``."""
