"""Every ``PYTFRT_*`` environment switch, in one table, and the one place that reads them.

Each switch (:data:`SWITCHES`) has a kind, a default, the values it accepts and what it does;
``docs/config.md`` lists them (a test compares the two).  Code reads a switch only through the
accessors here -- :func:`flag`, :func:`integer`, :func:`choice`, :func:`text` -- never through
``os.environ`` (a test checks ``src/`` for that), so a switch is parsed, defaulted and
validated the same way everywhere.

When a switch is read is the caller's business, as before: most are read when the thing they
switch is first used (so a test or a benchmark may set them just before, in-process); a few are
read once at import (``PYTFRT_NUM_THREADS``, ``PYTFRT_RECURRENT_NUMBA``,
``PYTFRT_JSON_SPLIT_BYTES``, ``PYTFRT_JSON_STREAM``), which the table says.  Reading is a
dictionary lookup plus a parse memoised per raw value: cheap enough for per-load paths.

Errors: a value the switch does not accept raises :class:`ConfigError` naming the switch, the
value and what it accepts (an unset or empty variable is the default).  Stdlib only; thread-safe
(the memo is a dict of immutable values).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["SWITCHES", "ConfigError", "Switch", "choice", "flag", "integer", "text"]


class ConfigError(ValueError):
    """A ``PYTFRT_*`` variable holds a value its switch does not accept."""


@dataclass(frozen=True)
class Switch:
    """One environment switch.

    Attributes:
        name: the variable (``PYTFRT_...``).
        kind: ``flag`` (on/off), ``int`` (a positive integer), ``choice`` (one of ``choices``)
            or ``text`` (any string, e.g. a path or a work-queue spec).
        default: the value when unset or empty (``None``: no value, the caller decides).
        doc: what it does (one sentence, as docs/config.md shows it).
        choices: the accepted values of a ``choice`` switch (compared case-insensitively).
        read: ``use`` (read when the feature is used) or ``import`` (once, at import).
    """

    name: str
    kind: str
    default: Any
    doc: str
    choices: tuple[str, ...] = ()
    read: str = "use"


ON: Final = frozenset({"1", "true", "yes", "on"})
OFF: Final = frozenset({"0", "false", "no", "off"})

SWITCHES: Final[dict[str, Switch]] = {
    s.name: s
    for s in (
        Switch("PYTFRT_WHOLE_FUNCTION", "flag", True,
               "Whole-function execution of qualifying BEF functions (docs/executor.md); read "
               "when a program is loaded."),
        Switch("PYTFRT_FUSE_SEGMENTS", "flag", True,
               "Fused segments (one Numba call for a run of tensor kernels) inside "
               "whole-function code; read when a program is loaded."),
        Switch("PYTFRT_NUMPY_FREE", "flag", True,
               "`bef_executor` runs a program whose kernels all have NumPy-free "
               "implementations without importing NumPy (docs/host.md); read at its start."),
        Switch("PYTFRT_NO_C_EAGER", "flag", False,
               "Turns the C fast path of the eager API off (the Python path runs)."),
        Switch("PYTFRT_MODEL_QUEUE", "text", None,
               "The work queue of the process-wide host that compiled models share "
               "(default `mstd:<CPU count>`)."),
        Switch("PYTFRT_CACHE_DIR", "text", None,
               "The directory of generated kernels (Numba's cache of them, the fused "
               "segments' compiled C) (default "
               "`$XDG_CACHE_HOME/pytfrt`, i.e. `~/.cache/pytfrt`); used only if owner-only "
               "writable (docs/security.md)."),
        Switch("PYTFRT_NUM_THREADS", "int", None,
               "The process's thread budget: threads a parallel kernel may use, the caller "
               "included (default: the CPU count); read once, when `pytfrt.host.parallel` is "
               "imported (docs/host.md).",
               read="import"),
        Switch("PYTFRT_GEMM", "choice", "onednn",
               "`numpy` runs matrix products with NumPy instead of oneDNN's sgemm.",
               choices=("onednn", "numpy")),
        Switch("PYTFRT_CONV", "choice", "onednn",
               "`builtin` turns oneDNN's convolution and pooling primitives off (the "
               "built-in algorithms run).", choices=("onednn", "builtin")),
        Switch("PYTFRT_BLOCKED_CONV", "flag", True,
               "`-tg-dnnl-blocked`: runs of convolutions on small images (ResNet-50's 14x14 "
               "and 7x7 stages) in oneDNN's channel-blocked layout (off: all NHWC); read when "
               "a model is compiled."),
        Switch("PYTFRT_CONV_NCHW_INPUT", "flag", True,
               "`-tg-conv-nchw-input`: a first convolution with 16 output channels reads the "
               "NCHW input image itself instead of its NHWC transpose (off: the transpose "
               "stays); read when a model is compiled."),
        Switch("PYTFRT_KEEP_HEAP", "flag", True,
               "A train step's freed tensors stay in the process heap for the next step "
               "(glibc's mmap and trim thresholds raised, docs/host.md); read when the first "
               "model that updates variables is made."),
        Switch("PYTFRT_RECURRENT_NUMBA", "flag", True,
               "The compiled (Numba) loops of the recurrent kernels (off: NumPy); read once, "
               "at import.", read="import"),
        Switch("PYTFRT_JSON_SCAN", "choice", "c",
               "The serving JSON number scanner: `c` (the C extension) or `numba`.",
               choices=("c", "numba")),
        Switch("PYTFRT_JSON_SPLIT_BYTES", "int", 256 * 1024,
               "Request bodies this large are scanned in pieces in parallel; read once, at "
               "import.", read="import"),
        Switch("PYTFRT_JSON_STREAM", "flag", True,
               "Scanning a request body as it arrives (off: after it is complete); read once, "
               "at import.", read="import"),
        Switch("PYTFRT_TFRT_REVISION", "choice", "main",
               "Which TFRT the runtime and tools behave as where TFRT's revisions disagree "
               "(docs/conformance.md): `main` (its main branch, 2025) or `de22adc4` (the "
               "revision of 2022 whose test files the older conformance set pins).",
               choices=("main", "de22adc4")),
        Switch("PYTFRT_READONLY_OPERANDS", "flag", False,
               "Graph kernels get read-only views of their array operands, so a kernel that "
               "writes an operand fails instead of corrupting the caller's data (a check for "
               "kernel authors; the test suite runs with it on); read when the runtime table "
               "is first built."),
        Switch("PYTFRT_PROGRESS", "choice", "auto",
               "Progress bars of the benchmarks (`pytfrt bench`, `benchmarks/`) on standard error: "
               "`auto` when it is a terminal, `1` always, `0` never.",
               choices=("auto", "1", "0")),
        Switch("PYTFRT_READONLY_REACHED", "text", None,
               "A directory: with PYTFRT_READONLY_OPERANDS on, each process writes a file there "
               "naming the graph kernels it ran on read-only operands (the test suite's check "
               "that every kernel was reached); read when the runtime table is first built."),
    )
}
"""Every switch, by name."""

_memo: dict[tuple[str, str], Any] = {}


def _switch(name: str, kind: str) -> Switch:
    s = SWITCHES.get(name)
    if s is None:
        raise KeyError(f"{name} is not a pytfrt switch (pytfrt.config.SWITCHES)")
    if s.kind != kind:
        raise TypeError(f"{name} is a {s.kind} switch, not {kind}")
    return s


def _value(s: Switch) -> Any:
    raw = os.environ.get(s.name, "").strip()
    if not raw:
        return s.default
    key = (s.name, raw)
    try:
        return _memo[key]
    except KeyError:
        pass
    low = raw.lower()
    value: Any
    if s.kind == "flag":
        if low in ON:
            value = True
        elif low in OFF:
            value = False
        else:
            raise ConfigError(f"{s.name}={raw!r}: expected one of 1/0, true/false, yes/no, "
                              "on/off")
    elif s.kind == "int":
        if not raw.isdigit() or int(raw) <= 0:
            raise ConfigError(f"{s.name}={raw!r}: expected a positive integer")
        value = int(raw)
    elif s.kind == "choice":
        if low not in s.choices:
            raise ConfigError(f"{s.name}={raw!r}: expected one of {', '.join(s.choices)}")
        value = low
    else:
        value = raw
    _memo[key] = value
    return value


def flag(name: str) -> bool:
    """The on/off switch ``name`` (its default when unset or empty).

    Raises:
        ConfigError: for a value that is not 1/0, true/false, yes/no or on/off.
    """
    return bool(_value(_switch(name, "flag")))


def integer(name: str) -> int | None:
    """The positive-integer switch ``name``, or its default (``None``: the caller decides).

    Raises:
        ConfigError: for a value that is not a positive integer.
    """
    return _value(_switch(name, "int"))  # type: ignore[no-any-return]


def choice(name: str) -> str:
    """The choice switch ``name``, lower-cased (its default when unset or empty).

    Raises:
        ConfigError: for a value not among its choices.
    """
    return str(_value(_switch(name, "choice")))


def text(name: str) -> str | None:
    """The text switch ``name`` as given (stripped), or its default."""
    return _value(_switch(name, "text"))  # type: ignore[no-any-return]
