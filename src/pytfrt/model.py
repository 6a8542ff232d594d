"""CompiledModel: a compiled graph you call with NumPy arrays, save, and load back.

::

    model = pytfrt.compile(source)          # pytfrt.compiler.api.compile
    y = model(x)                            # or model(x=x); structure as the source returns
    model.save("dir")                       # dir/model.bef, dir/weights.btf, dir/manifest.json
    m2 = pytfrt.load("dir")                 # no TensorFlow, ONNX or xDSL needed

A model is a BEF program with ``@tg_init`` (weights -> resources, run once at construction)
and ``@main`` (resources + inputs -> outputs), see ``pytfrt.compiler.lowering``.  Everything a
call needs is prepared at construction: the sync function, the resources list, one input
checker per input, the output packer.  A call checks each input's dtype and shape, runs
``@main``'s kernels and packs the outputs.

Thread-safety: calls may run concurrently from any number of threads (each has its own
registers; kernels do not share mutable state).  Errors: a bad input raises
:class:`InputError` (a ``ValueError``) naming the input; a kernel failure raises
:class:`ModelError` with the kernel's message.

This module never imports xDSL, TensorFlow or ONNX.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytfrt.bef.program import Program
from pytfrt.executor.loader import load_program
from pytfrt.executor.sync_executor import SyncBEFFunction
from pytfrt.host.async_value import AsyncValue, make_available
from pytfrt.host.execution_context import ExecutionContext, RequestContext, ResourceContext
from pytfrt.host.host_context import HostContext
from pytfrt.host.registry import KernelError
from pytfrt.signature import Signature, TensorSpec
from pytfrt.support.errors import PytfrtError
from pytfrt.tensor.dense_host_tensor import DenseHostTensor
from pytfrt.tensor.dtype import dtype_from_numpy

__all__ = ["CompiledModel", "InputError", "ModelError", "Signature", "TensorSpec", "load"]

INIT = "tg_init"
MAIN = "main"


class InputError(PytfrtError, ValueError):
    """A call got the wrong number, name, dtype or shape of inputs."""


class ModelError(PytfrtError, RuntimeError):
    """Running the model failed (a kernel error; the message is the kernel's)."""


_HOST_LOCK = threading.Lock()
_HOST: HostContext | None = None


def default_host() -> HostContext:
    """The process-wide HostContext models run on (created on first use).

    Its work queue is ``mstd:N`` with N = the CPU count (``PYTFRT_MODEL_QUEUE`` overrides the
    TFRT queue type); ``call_async`` runs calls there.
    """
    global _HOST
    with _HOST_LOCK:
        if _HOST is None:
            from pytfrt.host.kernel_libraries import builtin_registry

            spec = os.environ.get("PYTFRT_MODEL_QUEUE") or f"mstd:{max(os.cpu_count() or 1, 1)}"
            _HOST = HostContext(spec, registry=builtin_registry())
        return _HOST


def _input_checker(index: int, spec: TensorSpec) -> Callable[[Any], DenseHostTensor]:
    """A function that checks one input and wraps it (no copy for a matching ndarray)."""
    want = np.dtype(spec.dtype)
    dt = dtype_from_numpy(want) if want.kind != "O" else None
    shape = spec.shape
    rank = None if shape is None else len(shape)
    static = () if shape is None else tuple((i, d) for i, d in enumerate(shape) if d is not None)
    label = f"input {index} ('{spec.name}')"

    def check(x: Any) -> DenseHostTensor:
        if type(x) is not np.ndarray:
            if isinstance(x, np.ndarray):
                x = np.asarray(x)
            else:
                try:
                    x = np.asarray(x, dtype=want)
                except (TypeError, ValueError) as exc:
                    raise InputError(f"{label}: cannot convert to {want}: {exc}") from None
        if x.dtype != want:
            raise InputError(f"{label} must have dtype {want}, got {x.dtype}")
        if rank is not None:
            if x.ndim != rank:
                raise InputError(f"{label} must have shape {_fmt(shape)}, got {list(x.shape)}")
            for i, d in static:
                if x.shape[i] != d:
                    raise InputError(
                        f"{label} must have shape {_fmt(shape)}, got {list(x.shape)}"
                    )
        return DenseHostTensor(dt, x)  # type: ignore[arg-type]

    return check


def _fmt(shape: Sequence[int | None] | None) -> str:
    if shape is None:
        return "<any>"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


class CompiledModel:
    """A compiled model (see the module docstring).

    Args:
        program: the lowered program (``@tg_init``, ``@main``).
        weights: ``@tg_init``'s arguments, in order (arrays; not copied).
        signature: the model's signature.
        num_resources: the number of leading ``@main`` arguments produced by ``@tg_init``.
        weight_names: the names of ``weights`` (for ``save``).
        variables: names of the model's variables (state).
        host: the HostContext to run on (default :func:`default_host`).

    Raises:
        ModelError: if the program cannot be loaded or ``@tg_init`` fails.
    """

    def __init__(self, program: Program, weights: Sequence[np.ndarray], signature: Signature,
                 num_resources: int, weight_names: Sequence[str] = (),
                 variables: Sequence[str] = (), host: HostContext | None = None) -> None:
        self.program = program
        self.signature = signature
        self.weight_names = list(weight_names) or [f"w{i}" for i in range(len(weights))]
        self._weights = list(weights)
        self._variables = list(variables)
        self.host = host or default_host()
        try:
            bef = load_program(program, self.host)
        except PytfrtError as exc:
            raise ModelError(f"cannot load the model program: {exc}") from None
        init = bef.get_function(INIT)
        main = bef.get_function(MAIN)
        if init is None or main is None:
            raise ModelError("the program has no @tg_init or @main function")
        self._resource_context = ResourceContext()
        self._ctx = ExecutionContext(RequestContext(self.host, self._resource_context))
        self._resources = self._run_init(init, num_resources)
        self._main = main
        self._sync = main if isinstance(main, SyncBEFFunction) else None
        self._run = self._sync.execute_sync if self._sync is not None else None
        self._checks = [_input_checker(i, s) for i, s in enumerate(signature.inputs)]
        self._n_inputs = len(self._checks)
        self._input_index = {s.name: i for i, s in enumerate(signature.inputs)}
        self._pack = _packer(signature)

    def _run_init(self, init: Any, num_resources: int) -> list[Any]:
        args = [make_available(DenseHostTensor(dtype_from_numpy(w.dtype), w))
                for w in self._weights]
        results = init.execute(self._ctx, args)
        self.host.await_values(results)
        out = []
        for r in results:
            if r.is_error():
                raise ModelError(f"model initialisation failed: {r.error.message}")
            out.append(r.get())
        if len(out) != num_resources:
            raise ModelError(f"@tg_init returned {len(out)} resources, expected {num_resources}")
        return out

    # -- calling ------------------------------------------------------------------------------
    def _arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        if kwargs:
            args = self._bind_named(args, kwargs)
        if len(args) != self._n_inputs:
            names = ", ".join(s.name for s in self.signature.inputs)
            raise InputError(f"the model takes {self._n_inputs} inputs ({names}), got {len(args)}")
        values = self._resources.copy()
        for check, x in zip(self._checks, args, strict=True):
            values.append(check(x))
        return values

    def _bind_named(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        slots: list[Any] = list(args) + [_MISSING] * (self._n_inputs - len(args))
        if len(args) > self._n_inputs:
            raise InputError(f"the model takes {self._n_inputs} inputs, got {len(args)} "
                             "positional ones")
        for name, value in kwargs.items():
            i = self._input_index.get(name)
            if i is None:
                known = ", ".join(self._input_index)
                raise InputError(f"unknown input name '{name}' (inputs: {known})")
            if slots[i] is not _MISSING:
                raise InputError(f"input '{name}' is given twice")
            slots[i] = value
        missing = [s.name for s, v in zip(self.signature.inputs, slots, strict=True)
                   if v is _MISSING]
        if missing:
            raise InputError(f"missing inputs: {', '.join(missing)}")
        return tuple(slots)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the model on NumPy arrays; returns the outputs in the source's structure.

        Raises:
            InputError: wrong input count, name, dtype or shape.
            ModelError: a kernel failed.
        """
        values = self._arguments(args, kwargs)
        run = self._run
        if run is None:
            return self._pack(self._call_async_values(values))
        try:
            out = run(self._ctx, values)
        except KernelError as exc:
            raise ModelError(str(exc)) from None
        return self._pack(out)

    def _call_async_values(self, values: list[Any]) -> list[Any]:
        results = self._main.execute(self._ctx, [make_available(v) for v in values])
        self.host.await_values(results)
        out = []
        for r in results:
            if r.is_error():
                raise ModelError(r.error.message)
            out.append(r.get())
        return out

    def call_async(self, *args: Any, **kwargs: Any) -> AsyncValue[Any]:
        """Run the model on the host's work queue; returns an AsyncValue of the outputs.

        Input errors are raised at once (:class:`InputError`); a kernel failure makes the
        AsyncValue an error.
        """
        values = self._arguments(args, kwargs)

        def work() -> Any:
            if self._run is None:
                return self._pack(self._call_async_values(values))
            try:
                return self._pack(self._run(self._ctx, values))
            except KernelError as exc:
                raise ModelError(str(exc)) from None

        return self.host.enqueue_work(work)

    # -- introspection --------------------------------------------------------------------------
    @property
    def variables(self) -> dict[str, np.ndarray]:
        """The model's variables (copies), by name."""
        return {}

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.name}: {np.dtype(s.dtype)}{_fmt(s.shape)}"
                        for s in self.signature.inputs)
        return f"<CompiledModel ({ins}) -> {len(self.signature.outputs)} outputs>"


class _Missing:
    pass


_MISSING = _Missing()


def _packer(signature: Signature) -> Callable[[list[Any]], Any]:
    structure = signature.structure
    if structure == "single":
        return lambda out: out[0].array
    if structure == "list":
        return lambda out: [o.array for o in out]
    if structure == "dict":
        names = [s.name for s in signature.outputs]
        return lambda out: {n: o.array for n, o in zip(names, out, strict=True)}
    return lambda out: tuple(o.array for o in out)


def load(path: str | os.PathLike[str]) -> CompiledModel:
    """Load a model saved with :meth:`CompiledModel.save`.

    Raises:
        ModelError: if ``path`` is not a saved model directory (or is damaged).
    """
    raise ModelError("loading saved models is not available yet")

