"""Direct kernel calls for the async executor, generated once per binding shape at load time.

Binding a kernel's parameters by the ``@kernel`` rules is the same work on every call, so the
loader does it once: it renders the binding plan of :func:`pytfrt.host.binding.plan_binding`
(the rules' one home) as a Python call.  A kernel whose parameters can all be bound without a
:class:`~pytfrt.host.registry.KernelFrame` gets a *call function* ``call(R, inv)`` that reads
its operands straight from the register list ``R`` of the invocation ``inv`` and passes its
attribute and function constants, e.g. for ``%r7 = tfrt.add.i32 %r5, %r0``::

    def call(R, inv):
        return fn(R[o0]._value, R[o1]._value)

Why generated code: a positional call costs a fraction of a ``fn(*args)`` call, and a generic
binding loop several times more.  The source depends only on the *shape* of the binding (the
sequence of slot kinds below), so each shape is compiled once and cached; each kernel gets an
instance with its registers and constants as closure variables.

Slot kinds (one per parameter, variadic ones expanded to the operand count known at load):

* ``v`` -- the payload of an operand (``R[o]._value``);
* ``a`` -- the operand's AsyncValue itself (``R[o]``);
* ``p`` -- the payload of an operand whose register holds it unboxed (``R[o]``; the executor
  rewrites ``v`` into ``p`` for such registers, see ``kernel_info._unboxed_registers``);
* ``c`` -- a constant: an attribute value or a Function (``Attr[T]``, ``Function``);
* ``l`` -- a fresh list copy of a constant sequence (``RemainingAttrs``/``RemainingFunctions``);
* ``x`` -- the kernel's ExecutionContext, carrying its location (``inv.kernel_context(k)``).

The call returns the kernel's raw return value; turning it into result AsyncValues is the
executor's job.  Thread-safety: call functions are immutable closures, callable from any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from pytfrt.host.binding import plan_binding
from pytfrt.host.kernel_frame import KernelError
from pytfrt.host.registry import KernelEntry
from pytfrt.support.codegen import exec_generated

CHAIN_TYPE: Final = "!tfrt.chain"

# A slot: (kind, operand register) for "v"/"a"/"p", (kind, constant index) for "c"/"l",
# (kind, 0) for "x".  Constants index into a per-kernel tuple built by ``instantiate``.
Slot = tuple[str, int]
Constant = tuple[str, int]  # ("attr", i) | ("attrs", i) | ("func", i) | ("funcs", i)

_FACTORIES: dict[str, Callable[..., Callable[[list[Any], Any], Any]]] = {}


def plan_slots(
    entry: KernelEntry,
    operands: Sequence[int],
    num_attrs: int,
    num_funcs: int,
    register_types: Sequence[str],
) -> tuple[list[Slot], list[Constant]] | None:
    """Render ``entry``'s binding plan for one op, or ``None`` if it needs a KernelFrame.

    The plan comes from :func:`pytfrt.host.binding.plan_binding` (the one place the binding
    rules live); here it only becomes register indices and constants.  ``None`` also when the
    op does not fit the kernel: the frame path then reports that error at run time.
    """
    last = operands[-1] if operands else -1
    chain = 0 <= last < len(register_types) and register_types[last] == CHAIN_TYPE
    try:
        plan = plan_binding(entry.name, entry.signature, len(operands), chain, num_attrs,
                            num_funcs)
    except KernelError:
        return None
    slots: list[Slot] = []
    constants: list[Constant] = []
    for kind, i in plan:
        if kind in "va":
            slots.append((kind, operands[i]))
        elif kind == "x":
            slots.append(("x", 0))
        elif kind == "k":
            return None
        else:
            slots.append(("c" if kind in "cf" else "l", len(constants)))
            constants.append((_CONSTANT[kind], i))
    return slots, constants


_CONSTANT = {"c": "attr", "C": "attrs", "f": "func", "F": "funcs"}


def instantiate(
    fn: Callable[..., Any],
    slots: list[Slot],
    constants: list[Constant],
    attrs: Sequence[Any],
    funcs: Sequence[Any],
    kernel: Any,
) -> Callable[[list[Any], Any], Any]:
    """The call function of one kernel (``kernel`` is passed to ``inv.kernel_context``)."""
    values: list[Any] = []
    for what, i in constants:
        if what == "attr":
            values.append(attrs[i])
        elif what == "attrs":
            values.append(tuple(attrs[i:]))
        elif what == "func":
            values.append(funcs[i])
        else:
            values.append(tuple(funcs[i:]))
    shape = "".join(kind for kind, _ in slots)
    factory = _FACTORIES.get(shape)
    if factory is None:
        factory = _FACTORIES.setdefault(shape, _compile_factory(shape))
    registers = [i for kind, i in slots if kind in "vap"]
    return factory(fn, kernel, *registers, *values)


def _compile_factory(shape: str) -> Callable[..., Callable[[list[Any], Any], Any]]:
    """Compile ``make(fn, k, o0.., c0..)`` returning ``call(R, inv)`` for one slot shape."""
    params: list[str] = []
    consts: list[str] = []
    parts: list[str] = []
    for kind in shape:
        if kind in "vap":
            name = f"o{len(params)}"
            params.append(name)
            parts.append(f"R[{name}]._value" if kind == "v" else f"R[{name}]")
        elif kind == "x":
            parts.append("inv.kernel_context(k)")
        else:
            name = f"c{len(consts)}"
            consts.append(name)
            parts.append(name if kind == "c" else f"list({name})")
    header = ", ".join(["fn", "k", *params, *consts])
    source = (
        f"def make({header}):\n"
        f"    def call(R, inv):\n"
        f"        return fn({', '.join(parts)})\n"
        f"    return call\n"
    )
    namespace: dict[str, Any] = {}
    exec_generated(source, f"kernel call {shape or 'none'}", namespace)
    return namespace["make"]
