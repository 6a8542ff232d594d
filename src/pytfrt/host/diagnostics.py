"""Diagnostics: errors reported by kernels at their source location (docs/host.md).

A :class:`Diagnostic` is a message plus a :class:`~pytfrt.support.Location`; the HostContext
routes every emitted diagnostic to its diagnostic handler (a plain callable).  The default
handler prints ``file:line:col: error: message`` to stderr.  Handlers may be called from any
thread and must be thread-safe.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from pytfrt.support import tfrt_revision
from pytfrt.support.errors import ErrorCode, Status
from pytfrt.support.location import UNKNOWN_LOC, Location


def default_kernel_error_code() -> ErrorCode:
    """The code of a kernel error that names none: ``INTERNAL`` (TFRT's main branch) or
    ``UNKNOWN`` (TFRT de22adc4), per ``PYTFRT_TFRT_REVISION``."""
    return ErrorCode.INTERNAL if tfrt_revision.is_main() else ErrorCode.UNKNOWN


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """An error emitted at a location (TFRT's ``DecodedDiagnostic``).

    A kernel's diagnostic carries ``INTERNAL`` unless it names a code, as TFRT's
    ``EmitErrorAsync(exec_ctx, message)`` does since its errors became ``absl::Status``
    (``UNKNOWN``, its ``ErrorCode::kUnknown`` before, with ``PYTFRT_TFRT_REVISION=de22adc4``).
    """

    message: str
    location: Location = UNKNOWN_LOC
    code: ErrorCode = field(default_factory=default_kernel_error_code)

    @property
    def status(self) -> Status:
        """The error as a :class:`Status`."""
        return Status(self.message, self.code)

    def __str__(self) -> str:
        flc = self.location.file_line_col()
        if flc is not None:
            return f"{flc[0]}:{flc[1]}:{flc[2]}: error: {self.message}"
        return f"{self.location.opaque()}: error: {self.message}"


DiagnosticHandler = Callable[[Diagnostic], None]


def print_diagnostic(diag: Diagnostic) -> None:
    """The default handler: print the diagnostic to stderr."""
    print(diag, file=sys.stderr, flush=True)


@dataclass
class DiagnosticCollector:
    """A thread-safe handler that records diagnostics (for tests and embedding)."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, diag: Diagnostic) -> None:
        with self._lock:
            self.diagnostics.append(diag)

    @property
    def messages(self) -> list[str]:
        """The messages in emission order."""
        with self._lock:
            return [d.message for d in self.diagnostics]
