"""The CPU op handler: runs ops from an :class:`~.op_registry.OpRegistry` on host tensors.

Dispatch of one op (docs/eager.md), in :func:`dispatch_cpu_op`:

1. **Metadata**, synchronously, if every argument's metadata is known: the op's metadata function
   runs and its :class:`~.op_registry.OpError` propagates to the caller.  Arguments whose
   metadata is an error skip this step (the error propagates in step 2).
2. **Tensors**: if every argument tensor (and, for a side-effecting op, the incoming chain) is
   available, the op runs **inline** on the calling thread -- no AsyncValue, task or lock is
   created.  Otherwise the results are future handles (with the metadata from step 1 when
   known) and the op runs in the thread that makes the last input available.
3. Running: an argument error propagates to every result (not re-emitted); a cancelled request
   yields ``Cancelled`` results; arguments are converted (scalar/COO -> dense unless the op
   accepts them; strings only if accepted); the dispatch function's exception becomes the
   results' error (emitted as a diagnostic when ``emit_errors``).
4. Side-effecting ops (not ``NO_SIDE_EFFECTS``) given a chain return an out chain that becomes
   available when the op has run.

Unknown ops go to the fallback handler (``NullOpHandler`` by default).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytfrt.core_runtime.host_tensors import (
    COO,
    SCALAR,
    STRING,
    normalize,
    tensor_kind,
    to_dense_array,
)
from pytfrt.core_runtime.op_attrs import EMPTY_ATTRS, OpAttrsRef
from pytfrt.core_runtime.op_handler import (
    CoreRuntimeOp,
    NullOpHandler,
    OpHandler,
    OpResult,
)
from pytfrt.core_runtime.op_registry import OpError, OpFlags, OpRecord, OpRegistry
from pytfrt.core_runtime.tensor_handle import TensorHandle
from pytfrt.host.async_value import (
    AsyncValue,
    make_ready_chain,
    run_when_ready,
)
from pytfrt.host.diagnostics import Diagnostic
from pytfrt.support.errors import CANCELLED_STATUS, Status
from pytfrt.tensor.shape import TensorMetadata

if TYPE_CHECKING:
    from pytfrt.host.execution_context import ExecutionContext

_from_tensor = TensorHandle.from_tensor


class CpuOpHandler(OpHandler):
    """Runs the ops of ``registry`` on the CPU; unknown ops go to ``fallback``.

    Args:
        registry: the op table (defaults to the built-in CPU ops, see :mod:`.cpu_ops`).
        fallback: the handler asked for ops this one does not have.
    """

    name = "cpu"
    device = "CPU:0"

    def __init__(
        self, registry: OpRegistry | None = None, fallback: OpHandler | None = None
    ) -> None:
        if registry is None:
            from pytfrt.core_runtime.cpu_ops import cpu_op_registry

            registry = cpu_op_registry()
        self.registry = registry
        self.fallback = fallback if fallback is not None else NullOpHandler()
        self._ops: dict[str, CoreRuntimeOp] = {}

    def make_op(self, op_name: str) -> CoreRuntimeOp:
        op = self._ops.get(op_name)
        if op is not None:
            return op
        record = self.registry.get(op_name)
        if record is None:
            return self.fallback.make_op(op_name)
        op = CpuOp(record, self)
        self._ops[op_name] = op
        return op


class CpuOp(CoreRuntimeOp):
    """A registered CPU op bound to its handler; calling it runs :func:`dispatch_cpu_op`."""

    __slots__ = ("record",)

    def __init__(self, record: OpRecord, handler: OpHandler) -> None:
        super().__init__(record.name, handler)
        self.record = record

    def __call__(
        self,
        exec_ctx: ExecutionContext | None,
        args: Sequence[TensorHandle],
        attrs: OpAttrsRef = EMPTY_ATTRS,
        num_results: int = 1,
        chain: AsyncValue[Any] | None = None,
        emit_errors: bool = False,
    ) -> OpResult:
        tracer = exec_ctx.host.tracer if exec_ctx is not None else None
        if tracer is not None:  # op scopes (docs/tracing.md), see host.tracing
            with tracer.scope(f"{self.name}#op_handler={getattr(self.handler, 'name', '')}#", 1):
                return dispatch_cpu_op(tracer.trace_op_record(self.record), exec_ctx, args,
                                       attrs, num_results, chain, emit_errors)
        return dispatch_cpu_op(
            self.record, exec_ctx, args, attrs, num_results, chain, emit_errors
        )


def run_metadata(
    record: OpRecord, args: Sequence[TensorHandle], attrs: OpAttrsRef, num_results: int
) -> tuple[TensorMetadata, ...] | None:
    """Run ``record``'s metadata function if every argument's metadata is known and valid.

    Returns the result metadata, or ``None`` if it cannot run yet (or there is none).

    Raises:
        OpError: the metadata function's error, or a wrong result count.
    """
    fn = record.metadata
    if fn is None:
        return None
    mds = []
    for h in args:
        md = h.metadata_or_none()
        if not isinstance(md, TensorMetadata):
            return None  # unknown yet, or an error that step 2 propagates
        mds.append(md)
    try:
        out = fn(mds, attrs)
    except OpError:
        raise
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise OpError(str(exc) or type(exc).__name__) from exc
    result = (out,) if isinstance(out, TensorMetadata) else tuple(out)
    if len(result) != num_results:
        raise OpError(
            f"{record.name} produces {len(result)} result(s) but {num_results} were requested"
        )
    return result


def dispatch_cpu_op(
    record: OpRecord,
    exec_ctx: ExecutionContext | None,
    args: Sequence[TensorHandle],
    attrs: OpAttrsRef,
    num_results: int,
    chain: AsyncValue[Any] | None = None,
    emit_errors: bool = False,
) -> OpResult:
    """Dispatch ``record`` on ``args`` (see the module docstring for the steps).

    Raises:
        OpError: for metadata errors (step 1).
    """
    out_md = run_metadata(record, args, attrs, num_results)
    side_effects = not (record.flags & OpFlags.NO_SIDE_EFFECTS)
    waits: list[AsyncValue[Any]] = [
        h._av for h in args if h._t is None and h._av is not None and h._av.is_unavailable()
    ]
    if side_effects and chain is not None and chain.is_unavailable():
        waits.append(chain)
    location = exec_ctx.location if exec_ctx is not None else None
    if not waits:
        outs = _run(record, exec_ctx, args, attrs, num_results, out_md, chain, emit_errors,
                    location)
        results = [_to_handle(o, out_md, i) for i, o in enumerate(outs)]
        out_chain = _out_chain(side_effects, chain, outs)
        return results, out_chain
    avs: list[AsyncValue[Any]] = [AsyncValue() for _ in range(num_results)]
    results = [
        TensorHandle(out_md[i] if out_md is not None else None, avs[i])
        for i in range(num_results)
    ]
    out_chain_av: AsyncValue[Any] | None = (
        AsyncValue() if side_effects and chain is not None else None
    )

    def run_later() -> None:
        outs = _run(record, exec_ctx, args, attrs, num_results, out_md, chain, emit_errors,
                    location)
        for av, out in zip(avs, outs, strict=True):
            _fill(av, out)
        if out_chain_av is not None:
            _forward_chain(out_chain_av, _out_chain(True, chain, outs))

    run_when_ready(waits, run_later)
    return results, out_chain_av


def _out_chain(
    side_effects: bool, chain: AsyncValue[Any] | None, outs: list[Any]
) -> AsyncValue[Any] | None:
    if not side_effects or chain is None:
        return None
    if chain.is_error():
        return chain
    return make_ready_chain()


def _forward_chain(dst: AsyncValue[Any], src: AsyncValue[Any] | None) -> None:
    if src is None or src.is_concrete():
        dst.emplace(src.get() if src is not None else None)
    else:
        dst.set_error(src.error)


def _to_handle(out: Any, out_md: tuple[TensorMetadata, ...] | None, i: int) -> TensorHandle:
    if isinstance(out, AsyncValue):
        if out.is_concrete():
            return _from_tensor(normalize(out._value))
        return TensorHandle(out_md[i] if out_md is not None else None, _normalized(out))
    if isinstance(out, Status):
        return TensorHandle.from_error(out)
    return _from_tensor(out)


def _normalized(av: AsyncValue[Any]) -> AsyncValue[Any]:
    """An AV with the stored (normalized) form of ``av``'s tensor."""
    out: AsyncValue[Any] = AsyncValue()
    av.and_then(lambda: _fill(out, av))
    return out


def _fill(dst: AsyncValue[Any], out: Any) -> None:
    """Publish ``out`` (a tensor, a Status or an AsyncValue of a tensor) into ``dst``."""
    if isinstance(out, Status):
        dst.set_error(out)
    elif isinstance(out, AsyncValue):
        if out.is_available():
            if out.is_error():
                dst.set_error(out.error)
            else:
                dst.emplace(normalize(out._value))
        else:
            out.and_then(lambda: _fill(dst, out))
    else:
        dst.emplace(out)


def _first_error(args: Sequence[TensorHandle]) -> Status | None:
    err = None
    for h in args:
        if h._t is None:
            e = h.tensor_av.get_error_or_none()
            if e is not None:
                err = e  # the last error operand wins, as in the BEF executor
    return err


def _convert(record: OpRecord, tensor: Any) -> Any:
    """Convert one argument tensor to a form the op accepts (dense arrays by default)."""
    kind = tensor_kind(tensor)
    flags = record.flags
    if flags & OpFlags.ANY_TENSOR:
        return tensor
    if kind == SCALAR and flags & OpFlags.ALLOW_SCALAR:
        return tensor
    if kind == COO and flags & OpFlags.ALLOW_COO:
        return tensor
    if kind == STRING:
        if flags & OpFlags.ALLOW_STRING:
            return tensor
        raise OpError(f"{record.name} does not support StringHostTensor arguments")
    return to_dense_array(tensor)


def _run(
    record: OpRecord,
    exec_ctx: ExecutionContext | None,
    args: Sequence[TensorHandle],
    attrs: OpAttrsRef,
    num_results: int,
    out_md: tuple[TensorMetadata, ...] | None,
    chain: AsyncValue[Any] | None,
    emit_errors: bool,
    location: Any,
) -> list[Any]:
    """Run the op on available arguments; returns per result a tensor, AsyncValue or Status."""
    err = _first_error(args)
    if err is None and chain is not None and chain.is_error():
        err = chain.error
    if err is not None:
        return [err] * num_results
    if exec_ctx is not None and exec_ctx.request_context._cancel_value is not None:
        return [CANCELLED_STATUS] * num_results
    try:
        if out_md is None and record.metadata is not None:
            run_metadata(record, args, attrs, num_results)  # deferred metadata check
        tensors = [_convert(record, h.get_tensor()) for h in args]
        out = record.dispatch(tensors, attrs, exec_ctx)
    except Exception as exc:  # noqa: BLE001 - every op error becomes the results' error
        status = Status(str(exc) or type(exc).__name__)
        if emit_errors and exec_ctx is not None:
            exec_ctx.host.emit_error(Diagnostic(status.message, location or exec_ctx.location))
        return [status] * num_results
    outs = list(out) if isinstance(out, tuple) else [out]
    if len(outs) != num_results:
        status = Status(
            f"{record.name} produced {len(outs)} result(s) but {num_results} were requested"
        )
        if emit_errors and exec_ctx is not None:
            exec_ctx.host.emit_error(Diagnostic(status.message, location or exec_ctx.location))
        return [status] * num_results
    return [o if isinstance(o, (AsyncValue, Status)) else normalize(o) for o in outs]
