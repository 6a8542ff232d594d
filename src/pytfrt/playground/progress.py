"""``mlp.print_progress``: the XOR programs' progress line, shared by the playground's NumPy
library (:mod:`pytfrt.playground.mlp`) and its NumPy-free one
(:mod:`pytfrt.playground.buffer_kernels`).  Thread-safe (one ``print`` call)."""

from __future__ import annotations

from pytfrt.host.async_value import CHAIN, Chain
from pytfrt.host.registry import kernel


@kernel("mlp.print_progress")
def print_progress(step: int, loss: float) -> Chain:
    """Print ``step <n>: loss = <loss %f>``."""
    print(f"step {step}: loss = {loss:f}", flush=True)
    return CHAIN
