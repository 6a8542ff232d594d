"""A --kernels file that replaces the built-in tfrt.add.i32, asking to (override=True)."""

from pytfrt.host.registry import kernel


@kernel("tfrt.add.i32", override=True)
def add_i32(a: int, b: int) -> int:
    return a - b
