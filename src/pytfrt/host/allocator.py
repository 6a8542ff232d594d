"""Host allocators: accounting for runtime allocations (docs/host.md), observable in tests.

Python manages memory itself, so an allocator here *accounts* for allocations: tensor buffers
and other runtime objects call :meth:`HostAllocator.allocate` with their byte size and
:meth:`HostAllocator.deallocate` when freed, and the variants report, refuse or profile as TFRT's
do.  A tensor buffer of ``nbytes`` is accounted as :func:`host_buffer_size` bytes (TFRT's
``HostBuffer`` header), e.g. 192 for a ``[32]`` f32 tensor.

Variants, chosen by ``--host_allocator_type`` (:func:`create_allocator`):

* ``malloc`` -- counts nothing, never refuses.
* ``profiled_allocator`` -- counts; prints the profile at exit.
* ``leak_check_allocator`` (the tools' default) -- counts; at exit, if bytes are still
  allocated, prints the profile and ``Memory leak detected: ...`` and the process exits 1.
* ``test_fixed_size_1k`` -- 1024 bytes of capacity; requests of at most 32 bytes are not
  counted; logs each counted allocation and free to stderr and refuses what does not fit.

Thread-safe: every method takes the allocator's lock.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Final, TextIO

from pytfrt.support.errors import PytfrtError

HOST_BUFFER_HEADER: Final = 64

ALLOCATOR_TYPES: Final = (
    "malloc",
    "test_fixed_size_1k",
    "profiled_allocator",
    "leak_check_allocator",
)


class AllocationError(PytfrtError):
    """An allocation was refused."""


def host_buffer_size(nbytes: int, alignment: int = 16) -> int:
    """Bytes a tensor buffer of ``nbytes`` requests: header + data (+ alignment if > 16)."""
    if alignment <= 16:
        return HOST_BUFFER_HEADER + nbytes
    return HOST_BUFFER_HEADER + nbytes + alignment


@dataclass
class AllocatorStats:
    """Counters kept by the profiling variants."""

    current_allocations: int = 0
    max_allocations: int = 0
    total_allocations: int = 0
    current_bytes: int = 0
    max_bytes: int = 0


class HostAllocator:
    """Base allocator: accounts for allocations and never refuses (``malloc``)."""

    choosing_line = "Choosing malloc."
    fused_ok: bool = False
    """Whether fused segments (docs/executor.md) may make tensors under this allocator: only
    if it never refuses and what it reports is the balance, not the counts (the
    leak-checking allocator).  A fused segment accounts the tensors that leave it; its
    temporaries (made and dropped inside the one compiled call) are not accounted, which only
    the per-allocation counts (:attr:`stats`) could show."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.stats = AllocatorStats()

    def allocate(self, nbytes: int) -> bool:
        """Account for ``nbytes``; returns False if the allocation is refused."""
        with self._lock:
            s = self.stats
            s.current_allocations += 1
            s.total_allocations += 1
            s.max_allocations = max(s.max_allocations, s.current_allocations)
            s.current_bytes += nbytes
            s.max_bytes = max(s.max_bytes, s.current_bytes)
        return True

    def deallocate(self, nbytes: int) -> None:
        """Release ``nbytes`` accounted by a successful :meth:`allocate`."""
        with self._lock:
            self.stats.current_allocations -= 1
            self.stats.current_bytes -= nbytes

    def profile_lines(self) -> list[str]:
        """TFRT's profile report lines."""
        s = self.stats
        return [
            "HostAllocator profile:",
            f"Current number of allocations = {s.current_allocations}",
            f"Max number of allocations = {s.max_allocations}",
            f"Total number of allocations = {s.total_allocations}",
            f"Current number of bytes allocated = {s.current_bytes}",
            f"Max number of bytes allocated = {s.max_bytes}",
        ]

    def report_at_exit(self, out: TextIO) -> int:
        """Print what this variant prints at process exit; returns the exit status it demands."""
        return 0


class ProfiledAllocator(HostAllocator):
    """Counts allocations and prints the profile at exit."""

    choosing_line = "Choosing profiled allocator based on malloc."

    def report_at_exit(self, out: TextIO) -> int:
        for line in self.profile_lines():
            print(line, file=out)
        out.flush()
        return 0


class LeakCheckAllocator(HostAllocator):
    """Counts allocations; at exit reports leaked bytes and demands exit status 1."""

    choosing_line = "Choosing memory leak check allocator."
    fused_ok = True  # reports the balance (and the counts only with a leak, which it is)

    def report_at_exit(self, out: TextIO) -> int:
        s = self.stats
        if s.current_bytes == 0:
            return 0
        for line in self.profile_lines():
            print(line, file=out)
        print(
            f"Memory leak detected: {s.current_allocations} alive allocations, "
            f"{s.current_bytes} alive bytes",
            file=out,
        )
        out.flush()
        return 1


class FixedSizeAllocator(HostAllocator):
    """``test_fixed_size_1k``: refuses what exceeds its capacity; logs to ``log``."""

    choosing_line = "Choosing fixed size malloc."
    UNCOUNTED_LIMIT: Final = 32

    def __init__(self, capacity: int = 1024, log: TextIO | None = None) -> None:
        super().__init__()
        self.capacity = capacity
        self.remaining = capacity
        self._log = log

    def _emit(self, level: str, message: str) -> None:
        out = self._log if self._log is not None else sys.stderr
        print(f"{level} {message}", file=out, flush=True)

    def allocate(self, nbytes: int) -> bool:
        if nbytes <= self.UNCOUNTED_LIMIT:
            return True
        with self._lock:
            if nbytes > self.remaining:
                remaining = self.remaining
                fits = False
            else:
                self.remaining -= nbytes
                remaining = self.remaining
                fits = True
        if not fits:
            self._emit(
                "E",
                f"Attempted to allocate {nbytes} bytes. However current capacity is only "
                f"{remaining}.",
            )
            return False
        self._emit("I", f"Allocating {nbytes} bytes. {remaining} remaining.")
        return True

    def deallocate(self, nbytes: int) -> None:
        if nbytes <= self.UNCOUNTED_LIMIT:
            return
        with self._lock:
            self.remaining += nbytes
            available = self.remaining
        self._emit("I", f"Freeing {nbytes} bytes. {available} available.")


def create_allocator(kind: str) -> HostAllocator:
    """Create an allocator by its ``--host_allocator_type`` name.

    Raises:
        ValueError: for an unknown name (the message lists the accepted names).
    """
    if kind == "malloc":
        return HostAllocator()
    if kind == "profiled_allocator":
        return ProfiledAllocator()
    if kind == "leak_check_allocator":
        return LeakCheckAllocator()
    if kind == "test_fixed_size_1k":
        return FixedSizeAllocator()
    raise ValueError(
        f"unknown host allocator type {kind!r}; accepted: {', '.join(ALLOCATOR_TYPES)}"
    )
