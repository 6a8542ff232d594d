""":class:`OpTable`: a compute module's map from graph-dialect op names to compute functions.

Each compute module of the graph kernels (``array_ops``, ``data_ops``, ``graph_nn``, ...) holds
one ``GRAPH_OPS = OpTable()`` and registers functions with ``@GRAPH_OPS.op("name")``;
:mod:`pytfrt.backends.cpu.graph_kernels` merges the tables.  Filled at import, then read only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

F = Callable[..., Any]


class OpTable(dict[str, F]):
    """Op name (without ``tg.``) -> compute function."""

    def op(self, *names: str) -> Callable[[F], F]:
        """Decorator: register the function under each of ``names``."""

        def mark(fn: F) -> F:
            for n in names:
                self[n] = fn
            return fn

        return mark
