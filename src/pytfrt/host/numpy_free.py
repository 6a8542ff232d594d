"""NumPy-free host values: whether this process keeps NumPy out of its tensors and scalars.

A small program (the XOR training seed runs 2,000 steps on 4x2 tensors) spends less time
computing than NumPy's import costs.  ``bef_executor`` therefore runs a program whose kernels
all have NumPy-free implementations (the kernel library
:mod:`pytfrt.backends.cpu.buffer_kernels`) with this switch on, decided before the program
loads:

* ``DenseHostTensor.create`` makes tensors whose storage is a ``bytearray`` seen through a
  shaped memoryview (``DenseHostTensor.raw``, docs/host.md); reading ``.array`` imports NumPy
  and turns such a tensor into an ordinary one over the same buffer, so any kernel still works;
* ``f32`` scalars are Python floats holding float32 values (:func:`to_f32`) instead of
  ``numpy.float32`` objects;
* fused segments are compiled against the buffer protocol instead of NumPy's C API.

The switch is process-wide and only ever turned on (:func:`enable`), before any value exists;
a process that never turns it on behaves exactly as without this module.  Thread-safety:
:func:`enable` is meant for the driver's start, before other threads run.
"""

from __future__ import annotations

from array import array

ENABLED = False
"""Whether host values are kept NumPy-free (read it as ``numpy_free.ENABLED``)."""


def enable() -> None:
    """Turn the NumPy-free representation on for the rest of the process."""
    global ENABLED
    ENABLED = True


def to_f32(x: float) -> float:
    """``x`` rounded to float32 (to nearest even; beyond the float32 range: +-inf), as a
    Python float.  (The :mod:`array` module stores with a C cast, which does not raise on
    overflow, unlike :mod:`struct`.)"""
    return array("f", (x,))[0]
