"""Pytrees: nested tuples, lists and dicts of leaves, flattened and rebuilt (as in JAX).

Used by ``@pytfrt.function`` (:mod:`pytfrt.function`) for its arguments and results and by the
compiler's autodiff (:mod:`pytfrt.compiler.autodiff`) for gradients of nested arguments.  Pure
functions; thread-safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

LEAF = "*"
"""The treedef of a leaf."""


def tree_flatten(tree: Any) -> tuple[list[Any], Any]:
    """``(leaves, treedef)``: tuples, lists and dicts (sorted keys) are nodes, all else leaves.

    ``None`` is a node with no leaves (as in JAX).
    """
    leaves: list[Any] = []

    def walk(x: Any) -> Any:
        t = type(x)
        if t is tuple or t is list:
            return (t, tuple(walk(e) for e in x))
        if t is dict:
            keys = sorted(x)
            return (dict, tuple(keys), tuple(walk(x[k]) for k in keys))
        if x is None:
            return None
        leaves.append(x)
        return LEAF

    return leaves, walk(tree)


def tree_unflatten(treedef: Any, leaves: Sequence[Any]) -> Any:
    """The inverse of :func:`tree_flatten`."""
    it = iter(leaves)

    def build(d: Any) -> Any:
        if d is LEAF:
            return next(it)
        if d is None:
            return None
        if d[0] is dict:
            return {k: build(s) for k, s in zip(d[1], d[2], strict=True)}
        if d[0] is tuple:
            return tuple([build(s) for s in d[1]])
        return [build(s) for s in d[1]]

    return build(treedef)
