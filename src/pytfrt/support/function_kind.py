"""The kind of a function: BEF (async), native or sync (the BEF FunctionIndex kind byte)."""

from __future__ import annotations

import enum


class FunctionKind(enum.IntEnum):
    """How a function runs; the values are the BEF FunctionIndex kind bytes (docs/bef.md)."""

    BEF = 0
    NATIVE = 1
    SYNC = 2
