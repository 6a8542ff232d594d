"""Model signatures: :class:`TensorSpec` and :class:`Signature` (plain data, no dependencies).

Shared by the compiler (``GraphModule.signature``) and the runtime side (``CompiledModel``,
the saved manifest), so they live below both.  Immutable: thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TensorSpec:
    """One input or output: its name, NumPy dtype and shape (``None`` for dynamic dims).

    ``shape`` is ``None`` when even the rank is unknown.
    """

    name: str
    dtype: np.dtype
    shape: tuple[int | None, ...] | None

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (dtype by NumPy name)."""
        return {
            "name": self.name,
            "dtype": np.dtype(self.dtype).str if np.dtype(self.dtype).kind != "V"
            else str(self.dtype),
            "shape": None if self.shape is None else list(self.shape),
        }

    @classmethod
    def from_json(cls, data: Any) -> TensorSpec:
        """The inverse of :meth:`to_json`.

        Strict, because a saved manifest is untrusted input: the name is a string, the dtype
        one of :data:`TENSOR_DTYPES` (no object, string, void or structured dtypes), the shape
        ``None`` or a list of at most :data:`MAX_RANK` entries each ``None`` or an int in
        ``[0, MAX_DIM]``.

        Raises:
            ValueError: for a malformed entry (the message names what is wrong, never quoting
                more than a short prefix of the entry).
        """
        if not isinstance(data, dict):
            raise ValueError(f"a tensor spec must be an object, got {type(data).__name__}")
        name, dtype_text, shape = data.get("name"), data.get("dtype"), data.get("shape", ...)
        if not isinstance(name, str) or shape is ...:
            raise ValueError("a tensor spec needs a string 'name', a 'dtype' and a 'shape'")
        dtype = parse_dtype(dtype_text)
        return cls(name, dtype, None if shape is None else parse_shape(shape, f"'{name[:80]}'"))


TENSOR_DTYPES: tuple[str, ...] = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
)
"""The dtypes a model's inputs, outputs and weights may have (NumPy names)."""

MAX_RANK = 32
"""The largest rank a saved shape may have."""

MAX_DIM = 1 << 40
"""The largest dimension a saved shape may have (a guard against overflowing products)."""


def parse_dtype(text: Any) -> np.dtype:
    """The dtype named ``text`` (a NumPy name or type string, or ``bfloat16``).

    Raises:
        ValueError: if ``text`` is not a string naming one of :data:`TENSOR_DTYPES` in native
            byte order.
    """
    if text == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    if not isinstance(text, str) or len(text) > 16:
        raise ValueError("a dtype must be a short string")
    try:
        dtype = np.dtype(text)
    except (TypeError, ValueError):
        raise ValueError(f"unknown dtype {text!r}") from None
    if dtype.name not in TENSOR_DTYPES or not dtype.isnative:
        raise ValueError(f"dtype {text!r} is not a tensor dtype (allowed: "
                         f"{', '.join(TENSOR_DTYPES)})")
    return dtype


def parse_shape(shape: Any, what: str, dynamic: bool = True) -> tuple[Any, ...]:
    """A shape from JSON: a list of at most :data:`MAX_RANK` ints in ``[0, MAX_DIM]`` (and
    ``None`` for dynamic dims if ``dynamic``).

    Raises:
        ValueError: naming ``what`` for anything else.
    """
    if not isinstance(shape, list) or len(shape) > MAX_RANK:
        raise ValueError(f"the shape of {what} must be a list of at most {MAX_RANK} dims")
    for d in shape:
        if d is None and dynamic:
            continue
        if type(d) is not int or not 0 <= d <= MAX_DIM:
            raise ValueError(f"the shape of {what} has a bad dim (each must be an int in "
                             f"[0, 2**40]{' or null' if dynamic else ''})")
    return tuple(shape)


STRUCTURES = ("single", "tuple", "list", "dict")

CASTINGS = ("exact", "cast")
"""How a model takes inputs of another dtype than its signature's: ``exact`` refuses them (as
ONNX Runtime does), ``cast`` converts numbers to the input's dtype (as a Keras model or a
``tf.function`` called with NumPy values does: float64 -> float32, Python scalars and lists)."""


@dataclass(frozen=True)
class Signature:
    """Inputs and outputs of a model, and how outputs are returned.

    Attributes:
        inputs: the inputs in positional order.
        outputs: the outputs in result order.
        structure: ``single`` (one array), ``tuple``, ``list`` or ``dict`` (keyed by output
            name) -- the structure the source model returns.
        casting: the input dtype rule of the source framework, one of :data:`CASTINGS`.
    """

    inputs: tuple[TensorSpec, ...] = field(default_factory=tuple)
    outputs: tuple[TensorSpec, ...] = field(default_factory=tuple)
    structure: str = "tuple"
    casting: str = "exact"

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {
            "inputs": [s.to_json() for s in self.inputs],
            "outputs": [s.to_json() for s in self.outputs],
            "structure": self.structure,
            "casting": self.casting,
        }

    @classmethod
    def from_json(cls, data: Any) -> Signature:
        """The inverse of :meth:`to_json`.

        Raises:
            ValueError: for a malformed signature.
        """
        if not isinstance(data, dict):
            raise ValueError("the signature must be an object")
        structure = data.get("structure", "tuple")
        if structure not in STRUCTURES:
            raise ValueError(f"unknown output structure (one of {', '.join(STRUCTURES)})")
        inputs, outputs = data.get("inputs"), data.get("outputs")
        if not isinstance(inputs, list) or not isinstance(outputs, list):
            raise ValueError("the signature needs 'inputs' and 'outputs' lists")
        casting = data.get("casting", "exact")
        if casting not in CASTINGS:
            raise ValueError(f"unknown input casting (one of {', '.join(CASTINGS)})")
        sig = cls(tuple(TensorSpec.from_json(s) for s in inputs),
                  tuple(TensorSpec.from_json(s) for s in outputs), structure, casting)
        if not sig.outputs:
            raise ValueError("the signature has no outputs")
        if structure == "single" and len(sig.outputs) != 1:
            raise ValueError(f"structure 'single' needs one output, got {len(sig.outputs)}")
        keyed = [("input", sig.inputs)] + ([("output", sig.outputs)] if structure == "dict"
                                            else [])
        for what, specs in keyed:
            names = [s.name for s in specs]
            if len(set(names)) != len(names):
                raise ValueError(f"two {what}s have the same name")
        return sig
