"""Per-call buffer arenas: where planned activation buffers live between calls.

The ``tg.<op>.buf`` kernels (``pytfrt.backends.cpu.graph_kernels``) and a ``CompiledModel``'s
generated call function (``pytfrt.model``) inline :meth:`Arena.run`.
``-tg-plan-buffers`` gives ops a *slot* (shared by values whose lifetimes do not overlap, or
in place with a dying operand for elementwise ops) and a *site* (the op's own number).  At run
time each call of a model takes an :class:`Arena` from the model's pool, so concurrent calls
never share one.  :meth:`Arena.run` calls an op's compute function with ``out=`` the slot's
buffer when the op's input shapes are the ones it saw last time (so its output shape is
known) and the buffer has that shape and dtype; otherwise it computes without ``out`` and keeps
the result as the slot's buffer.  In the steady state (same input shapes) no call allocates a
new result buffer for a planned op.

Thread-safety: an arena is used by one call at a time (the pool hands it out).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


class Arena:
    """Slot buffers and, per site, the last (input shapes, output shape, dtype)."""

    __slots__ = ("slots", "memo")

    def __init__(self) -> None:
        self.slots: dict[int, np.ndarray] = {}
        self.memo: dict[int, tuple[Any, tuple[int, ...], np.dtype]] = {}

    def run(self, slot: int, site: int, fn: Callable[..., Any], arrays: list[Any],
            kwargs: dict[str, Any]) -> Any:
        """``fn(*arrays, **kwargs, out=<slot buffer>)`` when safe, else without ``out``."""
        key = [getattr(a, "shape", None) for a in arrays]
        m = self.memo.get(site)
        if m is not None and m[0] == key:
            buf = self.slots.get(slot)
            if buf is not None and buf.shape == m[1] and buf.dtype == m[2]:
                return fn(*arrays, **kwargs, out=buf)
        r = fn(*arrays, **kwargs)
        self.keep(slot, site, key, r)
        return r

    def keep(self, slot: int, site: int, key: Any, r: Any) -> Any:
        """Remember ``r`` (a fresh result for inputs of shapes ``key``) as ``slot``'s buffer
        (if it is an array the op may write into next time); returns ``r``."""
        if type(r) is np.ndarray and r.flags.c_contiguous and r.flags.writeable and r.base is None:
            self.memo[site] = (key, r.shape, r.dtype)
            self.slots[slot] = r
        return r
