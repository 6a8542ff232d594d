"""The CPU kernels' names for the process's parallel runtime (:mod:`pytfrt.host.parallel`).

Kernels get their threads from the host, as TFRT's kernels get them through ``ParallelFor``:
:func:`parallel_for`, :func:`chunks` and :func:`num_threads` are the host's, under the names
the CPU kernels have always imported (one thread budget for the process: the convolutions'
native spin pool, these helpers and the serving JSON scanner's pieces all count against it).
New code may import :mod:`pytfrt.host.parallel` directly.
"""

from __future__ import annotations

from pytfrt.host.parallel import chunks, num_threads, parallel_for

__all__ = ["chunks", "num_threads", "parallel_for"]
