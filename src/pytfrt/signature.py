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
    def from_json(cls, data: dict[str, Any]) -> TensorSpec:
        """The inverse of :meth:`to_json`.

        Raises:
            ValueError: for a malformed entry.
        """
        try:
            dtype = _parse_dtype(data["dtype"])
            shape = data["shape"]
            return cls(str(data["name"]), dtype,
                       None if shape is None else tuple(None if d is None else int(d)
                                                        for d in shape))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"bad tensor spec {data!r}: {exc}") from None


def _parse_dtype(text: str) -> np.dtype:
    if text == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(text)


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
    def from_json(cls, data: dict[str, Any]) -> Signature:
        """The inverse of :meth:`to_json`.

        Raises:
            ValueError: for a malformed signature.
        """
        try:
            structure = str(data.get("structure", "tuple"))
            if structure not in STRUCTURES:
                raise ValueError(f"unknown output structure {structure!r}")
            casting = str(data.get("casting", "exact"))
            if casting not in CASTINGS:
                raise ValueError(f"unknown input casting {casting!r}")
            return cls(
                tuple(TensorSpec.from_json(s) for s in data["inputs"]),
                tuple(TensorSpec.from_json(s) for s in data["outputs"]),
                structure,
                casting,
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"bad signature: {exc}") from None
