"""Importing TensorFlow for pytfrt's own commands without its start-up log lines.

``import tensorflow`` (2.16 and later) writes lines such as ``WARNING: All log messages before
absl::InitializeLog() is called are written to STDERR`` and ``I0000 ... port.cc:153] oneDNN
custom operations are on ...`` straight to file descriptor 2, from C++, whatever
``TF_CPP_MIN_LOG_LEVEL`` says.  In ``pytfrt compile``, ``pytfrt demo`` and the TF front end
they read like warnings about the user's model.  :func:`tensorflow` imports TensorFlow with
``TF_CPP_MIN_LOG_LEVEL=2`` (unless set) and file descriptor 2 redirected to a temporary file;
afterwards every line of it except those start-up lines (:data:`START_UP_NOISE`) is written to
the real standard error, so a genuine error or warning is delayed, not lost.

Thread-safety: the import happens once per process; while it runs, what other threads write
to standard error is held back and written after it.  Errors: those of ``import tensorflow``
(``ImportError`` when it is not installed), after the held-back output is written.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

START_UP_NOISE = re.compile(
    rb"^(WARNING: All log messages before absl::InitializeLog\(\) is called"
    rb"|I\d{4} [^\]]*\] (oneDNN custom operations are on"
    rb"|This TensorFlow binary is optimized to use available CPU instructions)"
    rb"|To enable the following instructions: .* rebuild TensorFlow)"
)
"""Lines TensorFlow prints at import that say nothing about the user's model."""


@contextlib.contextmanager
def filtered_stderr(drop: re.Pattern[bytes] = START_UP_NOISE) -> Iterator[None]:
    """File descriptor 2 goes to a temporary file for the block; at its end the lines that
    ``drop`` does not match are written to the real standard error."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable descriptor 2: nothing to filter
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [line for line in held.read().splitlines(keepends=True)
                    if not drop.match(line)]
            if kept:
                os.write(2, b"".join(kept))


def tensorflow() -> Any:
    """The ``tensorflow`` module, imported without its start-up lines (module docstring)."""
    module = sys.modules.get("tensorflow")
    if module is not None:
        return module
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with filtered_stderr():
        import tensorflow as tf
    return tf
