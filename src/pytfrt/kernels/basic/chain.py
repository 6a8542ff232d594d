"""Chain and device kernels of the ``tfrt`` dialect: ``tfrt.new.chain``, ``tfrt.merge.chains``,
``tfrt.alias.value`` and ``tfrt.get_device`` (docs/host.md, docs/executor.md, docs/conformance.md).

The executor is strict, so ``merge.chains`` runs only once every operand is available and simply
returns a ready chain; an error operand never reaches it (the executor propagates it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytfrt.host.async_value import CHAIN, AsyncValue, Chain
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.registry import Attr, KernelError, KernelRegistry, kernel

HOST_DEVICE_NAME = "CPU:0"


@kernel("tfrt.new.chain")
def new_chain() -> Chain:
    """A ready chain."""
    return CHAIN


@kernel("tfrt.merge.chains")
def merge_chains(*values: Any) -> Chain:
    """A ready chain (all operands, of any type, are available when this runs)."""
    return CHAIN


@kernel("tfrt.alias.value")
def alias_value(chain: Chain, value: AsyncValue[Any]) -> AsyncValue[Any]:
    """Returns ``value`` itself (one more reference), ordered after ``chain``."""
    return value.add_ref()


@dataclass(frozen=True, slots=True)
class Device:
    """A device handle (``!tfrt.device``): its name and type (``CPU:0`` is the host)."""

    name: str
    type: str = "cpu"


@kernel("tfrt.get_device")
def get_device(exec_ctx: ExecutionContext, device_name: Attr[str]) -> Any:
    """The device named ``device_name``; ``cannot find device <name>`` if there is none.

    Uses the host's ``device_manager`` (an object with ``get_device(name)`` returning ``None``
    when unknown) if it has one; otherwise only the host device ``CPU:0`` exists.
    """
    manager = getattr(exec_ctx.host, "device_manager", None)
    if manager is not None:
        device = manager.get_device(device_name)
        if device is None:
            raise KernelError(f"cannot find device {device_name}")
        return device
    if device_name != HOST_DEVICE_NAME:
        raise KernelError(f"cannot find device {device_name}")
    return Device(HOST_DEVICE_NAME)


def register(registry: KernelRegistry) -> None:
    """Register the chain and device kernels."""
    registry.add(new_chain, merge_chains, alias_value, get_device)
