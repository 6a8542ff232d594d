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
    /,
) -> None:
    """Tell the extension the classes and objects it works with (``pytfrt.eager`` calls it once).

    Raises:
        TypeError: the Tensor class or the counts object lacks the expected ``__slots__``.
    """

class binary:  # noqa: N801 - a C type, named like a function
    """A two-operand eager op: ``binary(ufunc, fallback, swapped=False)(x, y)``."""

    fn: Callable[..., Any]
    fallback: Callable[..., Any]
    swapped: int
    __wrapped__: Callable[..., Any]

    def __new__(cls, fn: Callable[..., Any], fallback: Callable[..., Any],
                swapped: bool = False) -> binary: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __get__(self, obj: Any, owner: Any = None) -> Any: ...

class unary:  # noqa: N801 - a C type, named like a function
    """A one-operand eager op: ``unary(fn, fallback)(x)``."""

    fn: Callable[..., Any]
    fallback: Callable[..., Any]
    swapped: int
    __wrapped__: Callable[..., Any]

    def __new__(cls, fn: Callable[..., Any], fallback: Callable[..., Any]) -> unary: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __get__(self, obj: Any, owner: Any = None) -> Any: ...
