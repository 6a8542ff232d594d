"""Direct kernel calls for the async executor, generated once per binding shape at load time.

Binding a kernel's parameters by the ``@kernel`` rules (spec 1.5) is the same work on every
call, so the loader does it once.  A kernel whose parameters can all be bound without a
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

from pytfrt.host.registry import KernelEntry, ParamRole

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
    """The static binding of ``entry`` for one op, or ``None`` if it needs a KernelFrame.

    ``None`` also when the binding cannot be decided here (operand count or attribute count
    does not fit): the frame path then reports the same error as before, at run time.
    """
    sig = entry.signature
    ops = list(operands)
    if not sig.variadic and len(ops) != sig.num_args:
        last = ops[-1] if ops else -1
        chain = 0 <= last < len(register_types) and register_types[last] == CHAIN_TYPE
        if len(ops) == sig.num_args + 1 and chain:
            ops.pop()  # the trailing chain rule, decided once
        else:
            return None
    slots: list[Slot] = []
    constants: list[Constant] = []
    arg_i = attr_i = func_i = 0
    for role in sig.roles:
        if role is ParamRole.ARG or role is ParamRole.ARG_AV:
            if arg_i >= len(ops):
                return None
            slots.append(("v" if role is ParamRole.ARG else "a", ops[arg_i]))
            arg_i += 1
        elif role is ParamRole.VAR_ARGS or role is ParamRole.VAR_ARG_AVS:
            kind = "v" if role is ParamRole.VAR_ARGS else "a"
            slots.extend((kind, r) for r in ops[arg_i:])
            arg_i = len(ops)
        elif role is ParamRole.ATTR:
            if attr_i >= num_attrs:
                return None
            slots.append(("c", len(constants)))
            constants.append(("attr", attr_i))
            attr_i += 1
        elif role is ParamRole.ATTRS:
            slots.append(("l", len(constants)))
            constants.append(("attrs", attr_i))
            attr_i = num_attrs
        elif role is ParamRole.FUNC:
            if func_i >= num_funcs:
                return None
            slots.append(("c", len(constants)))
            constants.append(("func", func_i))
            func_i += 1
        elif role is ParamRole.FUNCS:
            slots.append(("l", len(constants)))
            constants.append(("funcs", func_i))
            func_i = num_funcs
        elif role is ParamRole.EXEC_CTX:
            slots.append(("x", 0))
        else:  # KernelFrame
            return None
    return slots, constants


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
    exec(compile(source, f"<kernel call {shape or 'none'}>", "exec"), namespace)  # noqa: S102
    return namespace["make"]
