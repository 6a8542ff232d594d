"""An example pytfrt kernel plugin: one kernel, registered through the entry-point group.

Declared in this package's ``pyproject.toml``::

    [project.entry-points."pytfrt.kernels"]
    example = "pytfrt_example_plugin:register"

``pytfrt.host.registry.load_entry_point_kernels`` (called by ``builtin_registry()``) finds the
entry point and calls :func:`register` with the registry.
"""

from __future__ import annotations

from pytfrt.host import KernelRegistry, kernel


@kernel("example.double.i32")
def double_i32(x: int) -> int:
    """Twice ``x``, wrapped to a signed 32-bit integer like TFRT's i32 arithmetic."""
    return ((2 * x + 2**31) % 2**32) - 2**31


def register(registry: KernelRegistry) -> None:
    """Add this plugin's kernels to ``registry``."""
    registry.add(double_i32)
