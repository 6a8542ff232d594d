"""A --kernels file that registers a built-in kernel's name without asking to override it."""

from pytfrt.host.registry import kernel


@kernel("tfrt.add.i32")
def add_i32(a: int, b: int) -> int:
    return a - b
