"""pytfrt.eager: NumPy-like eager execution over the core runtime (``docs/eager.md``).

Every function dispatches one core-runtime op on the CPU op handler and returns a
:class:`Tensor` (a :class:`~pytfrt.core_runtime.TensorHandle` with NumPy conveniences) at once::

    from pytfrt import eager as te
    x = te.constant(np.ones((4, 2), np.float32))
    y = te.sigmoid(te.matmul(x, te.constant(w)))
    y.numpy()                     # waits for the value, converts (zero-copy)

Errors:
* metadata errors (shapes, dtypes, attributes) raise :class:`EagerOpError` **at the call**, with
  the op name and the Python location of the call;
* runtime errors (raised while computing, possibly later) surface at ``numpy()`` / ``__array__``
  as :class:`EagerRuntimeError`, naming the op and the location of the call that created it;
  errors propagate through chains of ops unchanged.

Fast path: when an op's inputs are already-computed dense tensors and its cheap guard accepts
them, the op runs inline: one dict-free closure call, the NumPy call, one object allocation --
no AsyncValue, task, lock or metadata object.  Anything else (future inputs, NumPy/Python inputs,
other dtypes, errors) takes the general core-runtime path, which checks metadata first.  When the
optional C extension ``pytfrt._eager_fast`` is built, the commonest case (float32/float64
operands) of the elementwise ops and of ``Tensor``'s ``+ - *`` runs in C, every other call in
the Python functions below (:func:`use_c_fast_path`; ``PYTFRT_NO_C_EAGER=1`` turns it off).

Zero-copy: ``constant(ndarray)`` wraps the array and ``numpy()`` returns the tensor's array
itself; mutating either mutates the other.

Process-global state (this module only): a default HostContext ("s" work queue unless
:func:`configure` says otherwise), its CoreRuntime and CPU op handler, created on first use.
The current request (see :func:`request`) is per thread.  Not thread-safe to reconfigure while
ops run.

Inputs: ``eager.Tensor``s, NumPy arrays and scalars, Python numbers and nested lists of them.
Dtypes combine by :func:`result_dtype` (NumPy's promotion; Python scalars are weak and Python
floats default to float32, as TF).  ``None``, strings (except for :func:`constant`), dicts and
other objects raise :class:`EagerOpError`.
"""

from __future__ import annotations

import builtins
import contextvars
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from pytfrt import config
from pytfrt.backends.cpu.op_math import MATH, Math
from pytfrt.backends.cpu.ops import matmul_result_shape
from pytfrt.core_runtime.core_runtime import CoreRuntime
from pytfrt.core_runtime.cpu_op_handler import CpuOpHandler
from pytfrt.core_runtime.cpu_ops import cpu_op_registry
from pytfrt.core_runtime.host_tensors import to_dense_array
from pytfrt.core_runtime.op_attrs import EMPTY_ATTRS, OpAttrsRef, attrs_from_dict
from pytfrt.core_runtime.op_handler import CoreRuntimeOp
from pytfrt.core_runtime.op_registry import OpError
from pytfrt.core_runtime.tensor_handle import CPU_DEVICE, TensorHandle
from pytfrt.host.async_value import AsyncValue
from pytfrt.host.diagnostics import DiagnosticCollector
from pytfrt.host.execution_context import ExecutionContext, RequestContext
from pytfrt.host.host_context import HostContext
from pytfrt.support.errors import PytfrtError, Status
from pytfrt.tensor.dtype import DType, dtype_from_name, dtype_from_numpy
from pytfrt.tensor.string_host_tensor import StringHostTensor

_ndarray = np.ndarray
_new = object.__new__
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_THIS_FILE = os.path.normcase(__file__)
_PKG_DIR = os.path.dirname(_THIS_FILE)


class EagerOpError(PytfrtError):
    """A metadata error, raised at the call site (message names the op and the location)."""


class EagerRuntimeError(PytfrtError):
    """An error computing a tensor, raised by ``numpy()`` (names the op and the call site)."""


# -- the default runtime (process-global, created lazily) --------------------------------------


class _Runtime:
    """The default HostContext, CoreRuntime, CPU handler and execution context."""

    def __init__(self, work_queue: str) -> None:
        self.diagnostics = DiagnosticCollector()
        self.host = HostContext(work_queue, diagnostic_handler=self.diagnostics)
        self.core = CoreRuntime.of(self.host)
        self.cpu = CpuOpHandler(cpu_op_registry())
        self.core.register_op_handler("cpu", self.cpu)
        self.exec_ctx = self.host.new_execution_context()
        self.ops: dict[str, CoreRuntimeOp] = {}

    def op(self, name: str) -> CoreRuntimeOp:
        op = self.ops.get(name)
        if op is None:
            op = self.cpu.make_op(name)
            self.ops[name] = op
        return op


_lock = threading.Lock()
_runtime: _Runtime | None = None
_work_queue = "s"


def configure(work_queue: str = "s") -> None:
    """Choose the default work queue (``"s"`` or ``"mstd:N"``); restarts the default runtime."""
    global _runtime, _work_queue
    with _lock:
        if _runtime is not None:
            _runtime.host.shutdown()
        _runtime = None
        _work_queue = work_queue


def runtime() -> _Runtime:
    """The default runtime (created on first use)."""
    global _runtime
    rt = _runtime
    if rt is None:
        with _lock:
            if _runtime is None:
                _runtime = _Runtime(_work_queue)
            rt = _runtime
    return rt


def core_runtime() -> CoreRuntime:
    """The default CoreRuntime (to register other op handlers or run ops by name)."""
    return runtime().core


_request_ctx: contextvars.ContextVar[ExecutionContext | None] = contextvars.ContextVar(
    "pytfrt_eager_request", default=None)


def _exec_ctx(rt: _Runtime) -> ExecutionContext:
    """The current thread's (context's) execution context: its request, or the default."""
    ctx = _request_ctx.get()
    return rt.exec_ctx if ctx is None else ctx


@contextmanager
def request() -> Iterator[RequestContext]:
    """Run the ops of the ``with`` body in a new request; ``cancel()`` it to cancel them.

    Ops not yet started when the request is cancelled produce ``Cancelled`` tensors.  The
    request is per thread (a ``contextvars`` variable): other threads' ops, and ops after the
    ``with`` body, are not in it; requests may nest and overlap across threads freely.
    """
    rt = runtime()
    ctx = rt.host.new_execution_context()
    token = _request_ctx.set(ctx)
    try:
        yield ctx.request_context
    finally:
        _request_ctx.reset(token)


# -- dtype rules and the tracing hook -----------------------------------------------------------


def result_dtype(a: np.dtype, a_weak: bool, b: np.dtype, b_weak: bool) -> np.dtype:
    """The common dtype of two operands; ``*_weak`` marks a Python scalar's default dtype.

    Two tensors or arrays must have the same dtype (``TypeError`` otherwise, as TF: cast one
    explicitly).  A Python scalar is *weak*: it
    takes the other operand's dtype when its kind fits (``int32_tensor * 2`` is int32,
    ``f16_tensor * 0.5`` is float16); a Python float meeting an integer or bool tensor gives
    float32, TF's default float (``int32_tensor * 0.5`` is float32, not truncated).  Two Python
    scalars: int32 for ints, float32 for floats, as TF.
    """
    if a_weak and not b_weak:
        a, b, b_weak = b, a, a_weak
    elif not b_weak:
        if a != b:
            raise TypeError(f"operands have different dtypes {a} and {b} (cast one with "
                            "eager.cast)")
        return a
    # b is weak (a Python scalar's default: bool_, int32 or float32)
    kb = b.kind
    ka = a.kind
    if kb == "b":
        return a
    if kb in "iu":
        return a if ka in "iuf" or a_weak and ka != "b" else b
    # a Python float
    return a if ka == "f" else b


def dtype_to_numpy(dtype: Any) -> np.dtype:
    """A NumPy dtype from a pytfrt DType, a TFRT name (``"f32"``), a NumPy dtype or type.

    Raises:
        TypeError: for anything else.
    """
    if isinstance(dtype, DType):
        return np.dtype(dtype.np_dtype)
    if isinstance(dtype, str):
        try:
            return np.dtype(dtype_from_name(dtype).np_dtype)
        except (KeyError, ValueError, PytfrtError):
            pass
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"not a dtype: {dtype!r}") from None


class TracedBase:
    """Base of values that stand for tensors while a function is traced.

    The eager op functions hand an op to ``args[i]._trace_eager(op_name, args, attrs,
    num_results)`` when one of its arguments is a TracedBase (checked only after the fast path
    declined, so the fast path costs nothing).  Defined here so the eager layer needs no compiler
    import; the tracer (``pytfrt.compiler.frontends.trace``) subclasses it.
    """

    __slots__ = ()

    def _trace_eager(self, op_name: str, args: Sequence[Any], attrs: dict[str, Any],
                     num_results: int | None) -> Any:
        raise NotImplementedError


# -- Tensor --------------------------------------------------------------------------------------


class Tensor(TensorHandle):
    """An eager tensor: a TensorHandle plus ``numpy()``, ``__array__`` and operators."""

    __slots__ = ()

    def numpy(self) -> np.ndarray:
        """Wait for the tensor and return it as an ndarray (zero-copy for dense tensors).

        Raises:
            EagerRuntimeError: if computing the tensor failed.
        """
        t = self._t
        if t is None:
            t = self._wait()
        if type(t) is _ndarray:
            return t
        if isinstance(t, StringHostTensor):
            return t.array  # type: ignore[no-any-return]
        return to_dense_array(t)

    def _wait(self) -> Any:
        av = self._av
        assert av is not None
        if av.is_unavailable():
            runtime().host.await_values([av])
        if av.is_error():
            raise EagerRuntimeError(av.error.message)
        return av.get()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        if dtype is not None and a.dtype != dtype:
            return a.astype(dtype)
        return a.copy() if copy else a

    def block_until_ready(self) -> Tensor:
        """Wait until the tensor exists (errors are raised by :meth:`numpy`)."""
        if not self.is_available():
            runtime().host.await_values([self.tensor_av])
        return self

    @property
    def ndim(self) -> int:
        """Rank (from the metadata; waits only if the metadata is not known)."""
        return len(self.shape)

    @property
    def shape(self) -> tuple[int, ...]:
        """The dimensions (metadata; waits if not known yet)."""
        t = self._t
        if type(t) is _ndarray:
            return t.shape  # type: ignore[no-any-return]
        if not self.is_metadata_available():
            self.block_until_ready()
        return self.metadata.shape.dims

    @property
    def dtype(self) -> np.dtype:  # type: ignore[override]
        """The NumPy dtype (waits if the metadata is not known yet)."""
        t = self._t
        if type(t) is _ndarray:
            return t.dtype  # type: ignore[no-any-return]
        return self.numpy().dtype

    @property
    def size(self) -> int:
        """The number of elements."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self) -> str:
        """Like ``tf.Tensor``'s: ``<pytfrt.eager.Tensor: shape=(2,), dtype=float32, numpy=...>``."""
        try:
            a = self.numpy()
        except EagerRuntimeError as exc:
            return f"<pytfrt.eager.Tensor: error={exc}>"
        if isinstance(a, np.ndarray) and a.dtype != object:
            return f"<pytfrt.eager.Tensor: shape={a.shape}, dtype={a.dtype}, numpy={a!r}>"
        return f"<pytfrt.eager.Tensor {self.format()}>"

    def __add__(self, other: Any) -> Tensor:
        return add(self, other)

    def __radd__(self, other: Any) -> Tensor:
        return add(other, self)

    def __sub__(self, other: Any) -> Tensor:
        return subtract(self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return subtract(other, self)

    def __mul__(self, other: Any) -> Tensor:
        return multiply(self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return multiply(other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return divide(self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return divide(other, self)

    def __matmul__(self, other: Any) -> Tensor:
        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return matmul(other, self)

    def __pow__(self, other: Any) -> Tensor:
        return pow(self, other)

    def __rpow__(self, other: Any) -> Tensor:
        return pow(other, self)

    def __neg__(self) -> Tensor:
        return neg(self)

    def __abs__(self) -> Tensor:
        return abs(self)

    def __lt__(self, other: Any) -> Tensor:
        return less(self, other)

    def __le__(self, other: Any) -> Tensor:
        return less_equal(self, other)

    def __gt__(self, other: Any) -> Tensor:
        return greater(self, other)

    def __ge__(self, other: Any) -> Tensor:
        return greater_equal(self, other)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        """Elementwise ``==`` (a bool Tensor), TF2's: see :func:`_tensor_equal`."""
        return _tensor_equal(self, other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        """Elementwise ``!=`` (a bool Tensor), TF2's: see :func:`_tensor_not_equal`."""
        return _tensor_not_equal(self, other)

    def __hash__(self) -> int:
        """Tensors are unhashable (``==`` is elementwise), as in TF2: key by :meth:`ref`."""
        raise TypeError("Tensor is unhashable. Instead, use tensor.ref() as the key.")

    def ref(self) -> TensorRef:
        """A hashable reference to this Tensor (equal only to references to the same one)."""
        return TensorRef(self)

    def __len__(self) -> int:
        shape = self.shape
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return int(shape[0])

    def __bool__(self) -> bool:
        return bool(self.numpy())

    def __float__(self) -> float:
        return float(self.numpy())

    def __int__(self) -> int:
        return int(self.numpy())

    def __index__(self) -> int:
        a = self.numpy()
        if a.dtype.kind not in "iu":
            raise TypeError(f"only integer tensors can be indices, got {a.dtype}")
        return int(a)

    def __getitem__(self, key: Any) -> Tensor:
        """NumPy indexing of the value (a view for basic indexing; waits for the value)."""
        if isinstance(key, Tensor):
            key = key.numpy()
        elif isinstance(key, tuple):
            key = tuple(k.numpy() if isinstance(k, Tensor) else k for k in key)
        try:
            r = self.numpy()[key]
        except (IndexError, TypeError, ValueError) as exc:
            raise EagerOpError(f"indexing: {exc} (called at {_call_site()})") from None
        return _available(r if type(r) is _ndarray else np.asarray(r))

    def __iter__(self) -> Iterator[Tensor]:
        for i in range(len(self)):
            yield self[i]

    @property
    def T(self) -> Tensor:  # noqa: N802 - NumPy's name
        """The transpose (axes reversed)."""
        return transpose(self)

    def reshape(self, *shape: Any) -> Tensor:
        """``reshape(self, shape)``; ``shape`` as one sequence or as separate ints."""
        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple | list) else shape
        return reshape(self, [int(d) for d in dims])

    def astype(self, dtype: Any) -> Tensor:
        """``cast(self, dtype)``."""
        return cast(self, dtype)


class TensorRef:
    """A hashable reference to a tensor, compared by identity (TF's ``tensor.ref()``).

    For dict keys and set members, which Tensors cannot be (``==`` is elementwise).
    ``deref()`` returns the tensor.
    """

    __slots__ = ("_tensor",)

    def __init__(self, tensor: Any) -> None:
        self._tensor = tensor

    def deref(self) -> Any:
        """The referenced tensor."""
        return self._tensor

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorRef) and other._tensor is self._tensor

    def __hash__(self) -> int:
        return id(self._tensor)

    def __repr__(self) -> str:
        return f"<Reference wrapping {self._tensor!r}>"


def _available(tensor: Any) -> Tensor:
    """A Tensor already holding ``tensor`` (an ndarray or host tensor): no AsyncValue at all.

    The one place an available handle is built (the fast paths and :func:`constant` use it).
    """
    h: Tensor = _new(Tensor)
    h._t = tensor
    h._av = None
    h._md = None
    h._device = CPU_DEVICE
    return h


class FastPathCounts:
    """How many eager op calls took the inline fast path and how many the general path.

    Tests assert on these so that a fast path that silently stopped applying fails the suite.
    Counts are plain integers updated without a lock (approximate if ops run concurrently
    from several threads).
    """

    __slots__ = ("fast", "general")

    def __init__(self) -> None:
        self.fast = 0
        self.general = 0

    def reset(self) -> None:
        """Set both counts to zero."""
        self.fast = 0
        self.general = 0


fast_path_counts = FastPathCounts()


def constant(value: Any, dtype: DType | str | Any = None) -> Tensor:
    """A tensor holding ``value`` (an ndarray is wrapped without copying).

    ``dtype`` may be a pytfrt DType, a TFRT dtype name (``"f32"``, ``"bf16"``) or a NumPy dtype.
    Without one, Python floats and ints (and lists of them) become float32 and int32, as in TF;
    NumPy arrays and scalars keep their dtype.  Strings (or arrays of them) become string
    tensors.
    """
    if isinstance(value, Tensor | TracedBase):
        return value  # type: ignore[return-value]
    if isinstance(value, TensorHandle):
        return _adopt(value)
    np_dtype: Any = None
    if dtype is not None:
        np_dtype = dtype_from_name(dtype) if isinstance(dtype, str) else dtype
        np_dtype = np_dtype.np_dtype if isinstance(np_dtype, DType) else np.dtype(np_dtype)
    array = np.asarray(value, dtype=np_dtype) if np_dtype is not None else as_array(value)
    if array.dtype.kind in "US" or (array.dtype == object and array.size
                                    and isinstance(array.reshape(-1)[0], str)):
        return _available(StringHostTensor.create(array.shape, array.reshape(-1).tolist()))
    return _available(array)


def as_array(value: Any) -> np.ndarray:
    """``np.asarray(value)``, except that Python floats and ints (and lists of them) become
    float32 and int32, TF's defaults (NumPy arrays and scalars keep their dtype)."""
    array = np.asarray(value)
    if not isinstance(value, np.ndarray | np.generic):
        if array.dtype == np.float64:
            return array.astype(np.float32)
        if array.dtype == np.int64:
            return array.astype(np.int32)
    return array


def _adopt(handle: TensorHandle) -> Tensor:
    if isinstance(handle, Tensor):
        return handle
    h: Tensor = _new(Tensor)
    h._t = handle._t
    h._av = handle._av
    h._md = handle._md
    h._device = handle._device
    return h


# -- the general path ------------------------------------------------------------------------------


def _call_site() -> str:
    """``file:line`` of the first frame outside pytfrt (the user's call)."""
    frame = sys._getframe(1)
    while frame is not None:
        name = os.path.normcase(frame.f_code.co_filename)
        if not name.startswith(_PKG_DIR):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "<unknown>"


call_site = _call_site
"""``file:line`` of the innermost frame outside the pytfrt package (used by the tracer too)."""


def _as_tensor(value: Any, like: Any = None) -> TensorHandle:
    if isinstance(value, TensorHandle):
        return value
    if (like is not None and not isinstance(value, np.ndarray) and np.ndim(value) == 0
            and like.is_metadata_available() and like.error is None):
        # A Python scalar takes the dtype of the tensor it meets (``x * 2``); one that does
        # not fit it (``int8_tensor + 1000``) keeps NumPy's own type and the op reports it.
        np_dtype = like.metadata.dtype.np_dtype
        try:
            return constant(np.asarray(value, dtype=np_dtype))
        except (TypeError, ValueError, OverflowError):
            return constant(value)
    return constant(value)


def _annotate(result: TensorHandle, arg_errors: set[int], where: str) -> Tensor:
    """A Tensor whose *new* errors name the op and the call site (propagated ones unchanged)."""

    def describe(status: Status) -> Status:
        if id(status) in arg_errors:
            return status
        return Status(f"{status.message} ({where})", status.code)

    if result.is_available():
        err = result.error
        if err is None:
            return _adopt(result)
        return _adopt(TensorHandle.from_error(describe(err)))
    av: AsyncValue[Any] = AsyncValue()
    src = result.tensor_av

    def done() -> None:
        if src.is_error():
            av.set_error(describe(src.error))
        else:
            av.emplace(src.get())

    src.and_then(done)
    return _adopt(TensorHandle(result._md, av))


def execute(
    op_name: str, *args: Any, num_results: int | None = None, **attrs: Any
) -> Any:
    """Run any CPU op by name: ``execute("tfrt_test.reshape", x, shape=[2, 4])``.

    Returns one Tensor, or a tuple of them for ops with several results.

    Raises:
        EagerOpError: unknown op or metadata error, with the call site.
    """
    return _dispatch(op_name, args, attrs_from_dict(attrs) if attrs else EMPTY_ATTRS,
                     num_results)


def _dispatch(
    op_name: str, args: Sequence[Any], attrs: OpAttrsRef, num_results: int | None = None
) -> Any:
    for a in args:
        if isinstance(a, TracedBase):
            return a._trace_eager(op_name, args, dict(attrs), num_results)
    rt = runtime()
    fast_path_counts.general += 1
    try:
        op = rt.op(op_name)
        record = getattr(op, "record", None)
        n = num_results if num_results is not None else (record.num_results if record else 1)
        first = next((a for a in args if isinstance(a, TensorHandle)), None)
        handles = [_as_tensor(a, first) for a in args]
        results, _ = op(_exec_ctx(rt), handles, attrs, n)
    except (OpError, ValueError, TypeError) as exc:
        raise EagerOpError(f"{op_name}: {exc} (called at {_call_site()})") from None
    arg_errors = {id(h.error) for h in handles if h.error is not None}
    where = f"in op {op_name} called at {_call_site()}"
    out = [_annotate(h, arg_errors, where) for h in results]
    if n == 1:
        return out[0]
    return tuple(out)


# -- operands: NumPy arrays, Python scalars, odd inputs -------------------------------------------

_WEAK = {bool: np.dtype(np.bool_), int: np.dtype(np.int32), float: np.dtype(np.float32)}
_BAD = (str, bytes, dict, set, frozenset, complex)


def _operand(v: Any) -> tuple[Any, np.dtype, bool] | None:
    """``(value, dtype, weak)`` for an op input held on the host now, or ``None`` for a future
    tensor, a non-dense one or a traced value (the general path handles those).

    Raises:
        EagerOpError: ``None``, strings, dicts, other non-numeric objects.
    """
    t = type(v)
    if t is Tensor:
        a = v._t
        return (a, a.dtype, False) if type(a) is _ndarray else None
    if t is _ndarray:
        return (v, v.dtype, False) if v.dtype.kind in "biuf" else _bad(v)
    wd = _WEAK.get(t)
    if wd is not None:
        return v, wd, True
    if isinstance(v, TensorHandle | TracedBase):
        return None
    if v is None or isinstance(v, _BAD):
        return _bad(v)
    try:
        a = np.asarray(v)
    except (TypeError, ValueError):
        return _bad(v)
    if a.dtype.kind not in "biuf":
        return _bad(v)
    return a, a.dtype, False


def _bad(v: Any) -> Any:
    raise EagerOpError(f"cannot use {type(v).__name__} {v!r:.60} as a tensor (called at "
                       f"{_call_site()})")


def _weak_scalar(v: Any, dt: np.dtype) -> Any:
    """A Python int/float as a NumPy scalar of the tensor's dtype ``dt`` when
    :func:`result_dtype` keeps ``dt`` (else ``None``: the general conversion decides)."""
    kind = dt.kind
    t = type(v)
    if t is float and kind != "f" or t is bool or kind not in "iuf":
        return None
    try:
        return dt.type(v)
    except (OverflowError, ValueError):
        return None


def _coerce2(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """Both inputs as ndarrays of their common dtype (:func:`result_dtype`), or ``None``."""
    ox = _operand(x)
    if ox is None:
        return None
    oy = _operand(y)
    if oy is None:
        return None
    a, da, wa = ox
    b, db, wb = oy
    try:
        dt = da if da is db and not wa else result_dtype(da, wa, db, wb)
        a = a if type(a) is _ndarray and a.dtype is dt else np.asarray(a, dt)
        b = b if type(b) is _ndarray and b.dtype is dt else np.asarray(b, dt)
    except (OverflowError, ValueError, TypeError) as exc:
        raise EagerOpError(f"{exc} (called at {_call_site()})") from None
    return a, b


# -- op functions (generated: each tries the record's fast path, then the general path) -------

# op name -> (its Python function, the ufunc or fast function, binary?) for the C fast path
_C_CANDIDATES: dict[str, tuple[Callable[..., Tensor], Callable[..., Any], bool]] = {}


def _unary(op_name: str, doc: str) -> Callable[[Any], Tensor]:
    record = cpu_op_registry().get(op_name)
    assert record is not None
    fast = record.fast

    def op(x: Any) -> Tensor:
        if fast is not None:
            t = type(x)
            a = x._t if t is Tensor else x if t is _ndarray else None
            if type(a) is _ndarray:
                r = fast(a)
                if r is not None:
                    fast_path_counts.fast += 1
                    return _available(r)
        if not isinstance(x, TensorHandle | TracedBase):
            x = _operand(x)[0]  # type: ignore[index]
        return _dispatch(op_name, (x,), EMPTY_ATTRS)  # type: ignore[no-any-return]

    op.__name__ = op.__qualname__ = op_name.rsplit(".", 1)[-1]
    op.__doc__ = doc
    if fast is not None:
        _C_CANDIDATES[op.__name__] = (op, getattr(fast, "ufunc", fast), False)
    return op


def _binary(op_name: str, doc: str) -> Callable[[Any, Any], Tensor]:
    record = cpu_op_registry().get(op_name)
    assert record is not None
    fast = record.fast
    ufunc = getattr(fast, "ufunc", None)

    def op(x: Any, y: Any) -> Tensor:
        if fast is not None:
            tx, ty = type(x), type(y)
            if ufunc is not None:
                # the commonest case inlined: two float32/float64 arrays (as Tensors or NumPy)
                # of one dtype, where ``fast`` is just the ufunc (dtypes checked by identity)
                a = x._t if tx is Tensor else x if tx is _ndarray else None
                b = y._t if ty is Tensor else y if ty is _ndarray else None
                if type(a) is _ndarray and type(b) is _ndarray:
                    d = a.dtype
                    if d is b.dtype and (d is _F32 or d is _F64):
                        try:
                            r = ufunc(a, b)
                        except ValueError:  # shapes do not broadcast: the general path says so
                            r = None
                        if type(r) is _ndarray:
                            fast_path_counts.fast += 1
                            # _available(r), inlined on purpose: a call costs a third of
                            # NumPy's whole add at these sizes
                            h: Tensor = _new(Tensor)
                            h._t = r
                            h._av = None
                            h._md = None
                            h._device = CPU_DEVICE
                            return h
            a = x._t if tx is Tensor else x if tx is _ndarray else None
            b = y._t if ty is Tensor else y if ty is _ndarray else None
            if type(a) is _ndarray:
                if type(b) is not _ndarray:
                    b = _weak_scalar(y, a.dtype) if ty in _WEAK else None
            elif type(b) is _ndarray and tx in _WEAK:
                a = _weak_scalar(x, b.dtype)
            if a is not None and b is not None:
                try:
                    r = fast(a, b)
                except ValueError:  # shapes do not broadcast: the general path reports it
                    r = None
                if r is not None:
                    fast_path_counts.fast += 1
                    return _available(r)
        pair = _coerce2(x, y)
        if pair is None:
            return _dispatch(op_name, (x, y), EMPTY_ATTRS)  # type: ignore[no-any-return]
        if fast is not None:
            try:
                r = fast(*pair)
            except ValueError:
                r = None
            if r is not None:
                fast_path_counts.fast += 1
                return _available(r)
        return _dispatch(op_name, pair, EMPTY_ATTRS)  # type: ignore[no-any-return]

    op.__name__ = op.__qualname__ = op_name.rsplit(".", 1)[-1]
    op.__doc__ = doc
    if ufunc is not None:
        _C_CANDIDATES[op.__name__] = (op, ufunc, True)
    return op


add = _binary("tfrt_test.add", "Elementwise ``x + y`` (equal dtypes, NumPy broadcasting).")
subtract = _binary("tfrt_test.subtract", "Elementwise ``x - y``.")
multiply = _binary("tfrt_test.multiply", "Elementwise ``x * y``.")
divide = _binary("tfrt_test.divide", "Elementwise ``x / y`` (floor division for integers).")
maximum = _binary("tfrt_test.maximum", "Elementwise maximum.")
minimum = _binary("tfrt_test.minimum", "Elementwise minimum.")
equal = _binary("tfrt_test.equal", "1 where ``x == y`` else 0, in the inputs' dtype.")
relu = _unary("tfrt_test.relu", "``max(x, 0)``.")
sigmoid = _unary("tfrt_test.sigmoid", "``1 / (1 + exp(-x))`` (floating point only).")
tanh = _unary("tfrt_test.tanh", "Hyperbolic tangent (floating point only).")
exp = _unary("tfrt_test.exp", "``e ** x`` (floating point only).")
log = _unary("tfrt_test.log", "Natural logarithm (floating point only).")
sqrt = _unary("tfrt_test.sqrt", "Square root (floating point only).")
neg = _unary("tfrt_test.neg", "``-x``.")
abs = _unary("tfrt_test.abs", "``|x|``.")  # noqa: A001 - NumPy's name
square = _unary("tfrt_test.square", "``x * x``.")


# -- the C fast path (the optional extension pytfrt._eager_fast, docs/eager.md) ----------------

# Tensor operators served by a binary C op object: dunder -> (op name, reflected?)
_C_OPERATORS = {"__add__": ("add", False), "__radd__": ("add", True),
                "__sub__": ("subtract", False), "__rsub__": ("subtract", True),
                "__mul__": ("multiply", False), "__rmul__": ("multiply", True)}
_PY_OPERATORS = {name: Tensor.__dict__[name] for name in _C_OPERATORS}


_c_reads_array_struct = False  # the extension reads an ndarray's dtype from NumPy's struct


def _configure_c(ext: Any, weak_floats: bool | None = None, read_struct: bool = True) -> None:
    """Hand the extension this module's classes and objects.

    ``weak_floats``: pass a Python float to the ufunc as is (default: on NumPy >= 2, whose
    ufuncs convert it to the array's dtype themselves -- NEP 50's weak scalars -- with the result
    :func:`_weak_scalar`'s conversion gives); ``read_struct=False`` reads an array's dtype as
    the attribute.  The non-default settings exist for tests of those paths.
    """
    global _c_reads_array_struct
    if weak_floats is None:
        weak_floats = int(np.__version__.split(".")[0]) >= 2
    _c_reads_array_struct = ext.configure(Tensor, _ndarray, _F32, _F64, np.float32, np.float64,
                                          np.asarray, CPU_DEVICE, fast_path_counts, weak_floats,
                                          read_struct)


def _load_c_fast_path() -> dict[str, Any]:
    """The C op objects (op name or Tensor dunder -> object); empty when the extension is not
    built or ``PYTFRT_NO_C_EAGER`` is set to anything but ``""``/``"0"``."""
    if config.flag("PYTFRT_NO_C_EAGER"):
        return {}
    try:
        from pytfrt import _eager_fast
    except ImportError:
        return {}
    _configure_c(_eager_fast)
    objs: dict[str, Any] = {}
    for name, (py_op, fn, is_binary) in _C_CANDIDATES.items():
        obj = _eager_fast.binary(fn, py_op) if is_binary else _eager_fast.unary(fn, py_op)
        functools.update_wrapper(obj, py_op)
        objs[name] = obj
    for dunder, (name, reflected) in _C_OPERATORS.items():
        py_method = _PY_OPERATORS[dunder]
        obj = _eager_fast.binary(_C_CANDIDATES[name][1], py_method, reflected)
        functools.update_wrapper(obj, py_method)
        objs[dunder] = obj
    return objs


_C_OPS = _load_c_fast_path()
_c_enabled = False


def use_c_fast_path(enabled: bool = True) -> bool:
    """Route the fast-path ops (``add``, ``subtract``, ``multiply``, ``maximum``, ``minimum``,
    ``exp``, ``log``, ``tanh``, ``sqrt``, ``sigmoid``, ``relu`` and ``Tensor``'s ``+ - *``)
    through the C extension (``enabled``) or the pure-Python functions.

    Returns whether the C path is in use afterwards (``False`` when the extension is not built
    or ``PYTFRT_NO_C_EAGER`` is set).  Both paths give identical results and errors.  Rebinds
    module globals and Tensor methods: not thread-safe while ops run (call it at start-up or in
    tests); modules that imported an op by name keep the function they imported.
    """
    global _c_enabled
    on = enabled and bool(_C_OPS)
    g = globals()
    for name, (py_op, _, _) in _C_CANDIDATES.items():
        g[name] = _C_OPS[name] if on else py_op
    for dunder in _C_OPERATORS:
        setattr(Tensor, dunder, _C_OPS[dunder] if on else _PY_OPERATORS[dunder])
    _c_enabled = on
    return on


def c_fast_path_enabled() -> bool:
    """Whether the eager ops currently run through the C extension (see :func:`use_c_fast_path`)."""
    return _c_enabled


use_c_fast_path(True)


def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
    """Matrix product (NumPy ``matmul``: rank > 2 operands are batches that broadcast),
    optionally with the last two axes of an operand transposed; one dtype after promotion."""
    if not transpose_a and not transpose_b:
        ta, tb = type(a), type(b)
        x = a._t if ta is Tensor else a if ta is _ndarray else None
        y = b._t if tb is Tensor else b if tb is _ndarray else None
        if type(x) is _ndarray and type(y) is _ndarray and x.shape[-1:] == y.shape[:1]:
            r = _matmul_fast(x, y)
            if r is not None:
                fast_path_counts.fast += 1
                return _available(r)
    pair = _coerce2(a, b)
    if pair is not None and (pair[0].ndim > 2 or pair[1].ndim > 2):
        x, y = pair
        if transpose_a:
            x = np.swapaxes(x, -1, -2)
        if transpose_b:
            y = np.swapaxes(y, -1, -2)
        try:
            matmul_result_shape(x.shape, y.shape)
            out = np.matmul(x, y)
        except (ValueError, OpError) as exc:
            raise EagerOpError(f"tfrt_test.matmul: {exc} (called at {_call_site()})") from None
        fast_path_counts.fast += 1
        return _available(out)
    if pair is not None and not transpose_a and not transpose_b:
        r = _matmul_fast(*pair) if pair[0].shape[-1:] == pair[1].shape[:1] else None
        if r is not None:
            fast_path_counts.fast += 1
            return _available(r)
    attrs = EMPTY_ATTRS if not transpose_a and not transpose_b else attrs_from_dict(
        {"transpose_a": transpose_a, "transpose_b": transpose_b})
    return _dispatch("tfrt_test.matmul", pair or (a, b), attrs)  # type: ignore[no-any-return]


def _host_binary(name: str, ufunc: Callable[[Any, Any], Any], doc: str
                 ) -> Callable[[Any, Any], Tensor]:
    """A binary op computed by a NumPy ufunc on the host values (waiting for futures)."""

    def op(x: Any, y: Any) -> Tensor:
        if isinstance(x, TracedBase) or isinstance(y, TracedBase):
            return _dispatch(f"eager.{name}", (x, y), EMPTY_ATTRS)  # type: ignore[no-any-return]
        x = x.numpy() if isinstance(x, Tensor) else x
        y = y.numpy() if isinstance(y, Tensor) else y
        pair = _coerce2(x, y)
        assert pair is not None
        try:
            r = ufunc(*pair)
        except (ValueError, TypeError) as exc:
            raise EagerOpError(f"{name}: {exc} (called at {_call_site()})") from None
        fast_path_counts.fast += 1
        return _available(r if type(r) is _ndarray else np.asarray(r))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


less = _host_binary("less", np.less, "``x < y`` (bool).")
less_equal = _host_binary("less_equal", np.less_equal, "``x <= y`` (bool).")
greater = _host_binary("greater", np.greater, "``x > y`` (bool).")
greater_equal = _host_binary("greater_equal", np.greater_equal, "``x >= y`` (bool).")
not_equal = _host_binary("not_equal", np.not_equal, "``x != y`` (bool).")
pow = _host_binary("pow", np.power, "``x ** y`` (NumPy's rules after promotion).")  # noqa: A001


def _equality(name: str, ufunc: Callable[[Any, Any], Any], unequal: bool
              ) -> Callable[[Any, Any], Any]:
    """The Tensor ``==`` / ``!=`` operators (TF2's ``tensor_equals`` / ``tensor_not_equals``).

    Elementwise, a bool Tensor (NumPy's promotion and broadcasting); ``None`` is unequal to
    every tensor (a Python bool, ``unequal``); shapes that do not broadcast are unequal (a bool
    scalar Tensor).  Traced operands trace ``tg.equal`` / ``tg.not_equal``.
    """
    elementwise = _host_binary(name, ufunc, "")

    def op(x: Any, y: Any) -> Any:
        if x is None or y is None:
            return unequal
        if not isinstance(x, TracedBase) and not isinstance(y, TracedBase):
            try:
                np.broadcast_shapes(np.shape(x.numpy() if isinstance(x, Tensor) else x),
                                    np.shape(y.numpy() if isinstance(y, Tensor) else y))
            except ValueError:
                return _available(np.asarray(unequal))
        return elementwise(x, y)

    op.__name__ = op.__qualname__ = f"_tensor_{name}"
    return op


_tensor_equal = _equality("equal", np.equal, False)
_tensor_not_equal = _equality("not_equal", np.not_equal, True)


def zeros(shape: Any, dtype: Any = np.float32) -> Tensor:
    """A tensor of zeros (float32 by default)."""
    return _available(np.zeros(shape, dtype_to_numpy(dtype)))


def ones(shape: Any, dtype: Any = np.float32) -> Tensor:
    """A tensor of ones (float32 by default)."""
    return _available(np.ones(shape, dtype_to_numpy(dtype)))


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Tensor:
    """``np.arange`` as a tensor (int32 for Python ints, float32 for Python floats, as TF)."""
    args = (start,) if stop is None else (start, stop, step)
    if dtype is None:
        dtype = np.float32 if builtins.any(isinstance(a, float) for a in args) else np.int32
    return _available(np.arange(*args, dtype=dtype_to_numpy(dtype)))


def random_uniform(shape: Any, minval: float = 0.0, maxval: float = 1.0, dtype: Any = np.float32,
                   seed: int | None = None) -> Tensor:
    """Uniform random numbers in ``[minval, maxval)`` (NumPy PCG64; ``seed``: repeatable)."""
    rng = np.random.default_rng(seed)
    return _available(rng.uniform(minval, maxval, shape).astype(dtype_to_numpy(dtype)))


def random_normal(shape: Any, mean: float = 0.0, stddev: float = 1.0, dtype: Any = np.float32,
                  seed: int | None = None) -> Tensor:
    """Normal random numbers (NumPy's PCG64; ``seed`` for repeatability)."""
    rng = np.random.default_rng(seed)
    return _available(rng.normal(mean, stddev, shape).astype(dtype_to_numpy(dtype)))


def _axis_attrs(axis: Any, keepdims: bool) -> OpAttrsRef:
    attrs: dict[str, Any] = {}
    if axis is not None:
        attrs["axis"] = list(axis) if isinstance(axis, (tuple, list)) else int(axis)
    if keepdims:
        attrs["keepdims"] = True
    return attrs_from_dict(attrs)


def reduce_mean(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Mean over ``axis`` (an int, a sequence, or ``None`` for all axes); floats only."""
    return _dispatch("tfrt_test.reduce_mean", (x,), _axis_attrs(axis, keepdims))  # type: ignore[no-any-return]


def reduce_sum(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Sum over ``axis`` (all axes if ``None``)."""
    return _dispatch("tfrt_test.reduce_sum", (x,), _axis_attrs(axis, keepdims))  # type: ignore[no-any-return]


def reduce_max(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Maximum over ``axis`` (all axes if ``None``)."""
    return _dispatch("tfrt_test.reduce_max", (x,), _axis_attrs(axis, keepdims))  # type: ignore[no-any-return]


def reduce_min(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Minimum over ``axis`` (all axes if ``None``)."""
    return _dispatch("tfrt_test.reduce_min", (x,), _axis_attrs(axis, keepdims))  # type: ignore[no-any-return]


def argmax(x: Any, axis: int = 0) -> Tensor:
    """Index of the maximum along ``axis`` (i32)."""
    return _dispatch("tfrt_test.argmax", (x,), attrs_from_dict({"axis": int(axis)}))  # type: ignore[no-any-return]


def softmax(x: Any, axis: int = -1) -> Tensor:
    """Softmax along ``axis`` (floating point only; max-subtracted, so stable)."""
    if axis == -1 and type(x) is Tensor and type(x._t) is _ndarray:
        r = _softmax_fast(x._t)
        if r is not None:
            fast_path_counts.fast += 1
            return _available(r)
    attrs = EMPTY_ATTRS if axis == -1 else attrs_from_dict({"axis": int(axis)})
    return _dispatch("tfrt_test.softmax", (x,), attrs)  # type: ignore[no-any-return]


_softmax_fast: Callable[..., Any] = cpu_op_registry().get("tfrt_test.softmax").fast  # type: ignore[union-attr,assignment]
_matmul_fast: Callable[..., Any] = cpu_op_registry().get("tfrt_test.matmul").fast  # type: ignore[union-attr,assignment]


def cast(x: Any, dtype: Any) -> Tensor:
    """``x`` converted to ``dtype``: a DType, a TFRT name (``"f16"``, ``"bf16"``) or a NumPy
    dtype (``np.float64``, ``"float32"``)."""
    if isinstance(dtype, DType):
        name = dtype.name
    elif isinstance(dtype, str) and not dtype.startswith(("float", "int", "uint", "bool")):
        name = dtype
    else:
        name = dtype_from_numpy(dtype_to_numpy(dtype)).name
    return _dispatch("tfrt_test.cast", (x,), attrs_from_dict({"type": name}))  # type: ignore[no-any-return]


def reshape(x: Any, shape: Sequence[int]) -> Tensor:
    """``x`` with a new shape (one ``-1`` allowed); a view when possible."""
    return _dispatch("tfrt_test.reshape", (x,), attrs_from_dict({"shape": list(shape)}))  # type: ignore[no-any-return]


def transpose(x: Any, perm: Sequence[int] | None = None) -> Tensor:
    """``x`` with permuted axes (reversed if ``perm`` is ``None``)."""
    attrs = EMPTY_ATTRS if perm is None else attrs_from_dict({"perm": list(perm)})
    return _dispatch("tfrt_test.transpose", (x,), attrs)  # type: ignore[no-any-return]


def expand_dims(x: Any, axis: int) -> Tensor:
    """``x`` with a new axis of size 1 at ``axis``."""
    return _dispatch("tfrt_test.expand_dims", (x,), attrs_from_dict({"axis": int(axis)}))  # type: ignore[no-any-return]


def squeeze(x: Any, axis: Any = None) -> Tensor:
    """``x`` without the size-1 axes (all, or those in ``axis``)."""
    attrs = EMPTY_ATTRS if axis is None else _axis_attrs(axis, False)
    return _dispatch("tfrt_test.squeeze", (x,), attrs)  # type: ignore[no-any-return]


def concat(xs: Sequence[Any], axis: int = 0) -> Tensor:
    """Concatenation of ``xs`` along ``axis``."""
    return _dispatch("tfrt_test.concat", tuple(xs), attrs_from_dict({"axis": int(axis)}))  # type: ignore[no-any-return]


def broadcast_to(x: Any, shape: Sequence[int]) -> Tensor:
    """``x`` broadcast to ``shape`` (a new contiguous tensor)."""
    return _dispatch("tfrt_test.broadcast_to", (x,), attrs_from_dict({"shape": list(shape)}))  # type: ignore[no-any-return]


# -- ops from the op definitions: every elementwise op record, and catalogue ops by name ------
#
# These compute on the host values (waiting for future inputs) with the op's one compute
# function (pytfrt.backends.cpu.op_math for elementwise ops, the graph kernels' table for the
# others), and trace the catalogue op itself under @pytfrt.function.

_DOMAIN_KINDS = {"float": "f", "numeric": "iuf", "integer": "biu", "bool": "b", "arith": "biuf",
                 "any": "biuf"}
_DOMAIN_WHAT = {"float": "a floating-point", "numeric": "a numeric (not bool)",
                "integer": "an integer or bool", "bool": "a bool"}


def _traced(args: Sequence[Any]) -> TracedBase | None:
    for a in args:
        if isinstance(a, TracedBase):
            return a
    return None


def _host_operand(v: Any) -> Any:
    """An op input as a host value for :func:`_operand` (futures waited for)."""
    return v.numpy() if isinstance(v, Tensor) else v


def _host_arrays(vals: list[Any]) -> list[np.ndarray]:
    """One or two op inputs as ndarrays of their common dtype (:func:`result_dtype`; arrays of
    one dtype, bfloat16 too, are taken as they are)."""
    if all(type(v) is _ndarray for v in vals) and len({v.dtype for v in vals}) == 1:
        return list(vals)
    if len(vals) == 2:
        pair = _coerce2(*vals)
        assert pair is not None
        return list(pair)
    o = _operand(vals[0])
    assert o is not None
    return [o[0] if type(o[0]) is _ndarray else np.asarray(o[0], o[1])]


def _op_error(name: str, exc: BaseException) -> EagerOpError:
    return EagerOpError(f"{name}: {exc} (called at {_call_site()})")


def _elementwise(m: Math, name: str, doc: str) -> Callable[..., Tensor]:
    """The eager function of an elementwise op record (operands promoted as :func:`add`)."""
    allowed = _DOMAIN_KINDS[m.domain]
    defaults = {k: d for k, (_, d) in m.attrs.items()}

    def op(*args: Any, **attrs: Any) -> Tensor:
        if len(args) != m.arity:
            raise EagerOpError(f"{name} takes {m.arity} operands, got {len(args)} (called at "
                               f"{_call_site()})")
        unknown = set(attrs) - set(defaults)
        if unknown:
            raise EagerOpError(f"{name}: unknown argument {sorted(unknown)[0]!r} (called at "
                               f"{_call_site()})")
        full = {**defaults, **attrs}
        tb = _traced(args)
        if tb is not None:
            return tb._trace_eager(f"tg.{m.name}", args, full, 1)  # type: ignore[no-any-return]
        vals = [_host_operand(a) for a in args]
        cond = None
        if m.arity == 3:  # select: a bool condition, then two operands of one type
            cond = np.asarray(vals[0]).astype(np.bool_, copy=False)
            vals = vals[1:]
        arrays = _host_arrays(vals)
        kind = arrays[0].dtype.kind
        if kind not in allowed and not (m.domain == "any" or kind == "V" and "f" in allowed):
            raise EagerOpError(f"{name} requires {_DOMAIN_WHAT.get(m.domain, 'a')} tensor, got "
                               f"{arrays[0].dtype} (called at {_call_site()})")
        if cond is not None:
            arrays.insert(0, cond)
        try:
            with np.errstate(all="ignore"):
                r = m.compute(*arrays, **full)
        except (OpError, ValueError, TypeError, ArithmeticError) as exc:
            raise _op_error(name, exc) from None
        fast_path_counts.fast += 1
        return _available(r if type(r) is _ndarray else np.asarray(r))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc or m.doc or f"Elementwise ``{m.name}`` (the ``tg.{m.name}`` op)."
    return op


MATH_FUNCTIONS: dict[str, Callable[..., Tensor]] = {}
"""Elementwise op name -> its eager function (the public one when the record names it)."""
for _m in MATH.values():
    _existing = globals().get(_m.eager or "")
    if _m.eager and callable(_existing):
        MATH_FUNCTIONS[_m.name] = _existing
        continue
    _fn = _elementwise(_m, _m.eager or _m.name, "")
    MATH_FUNCTIONS[_m.name] = _fn
    if _m.eager:
        globals()[_m.eager] = _fn


def _catalogue_op(name: str, args: Sequence[Any], attrs: dict[str, Any]) -> Any:
    """Run catalogue op ``tg.<name>`` on host values with its compute function, or trace it."""
    tb = _traced(args)
    if tb is not None:
        return tb._trace_eager(f"tg.{name}", args, attrs, 1)
    from pytfrt.backends.cpu.graph_kernels import graph_ops

    arrays = []
    for a in args:
        o = _operand(_host_operand(a))
        assert o is not None
        arrays.append(o[0] if type(o[0]) is _ndarray else np.asarray(o[0], o[1]))
    try:
        with np.errstate(all="ignore"):
            r = graph_ops()[name](*arrays, **attrs)
    except (OpError, ValueError, TypeError, IndexError, ArithmeticError) as exc:
        raise _op_error(name, exc) from None
    return _available(r if type(r) is _ndarray else np.asarray(r))


def where(cond: Any, x: Any, y: Any) -> Tensor:
    """``x`` where ``cond`` else ``y`` (NumPy broadcasting; ``tg.select``)."""
    return MATH_FUNCTIONS["select"](cond, x, y)


def clip(x: Any, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002 - NumPy's names
    """``x`` limited to ``[min, max]`` (``None``: no bound).  Python-number bounds make one
    ``tg.clip``; tensor bounds a ``maximum`` and a ``minimum`` (gradients flow to them)."""
    scalar = (int, float, type(None))
    if isinstance(min, scalar) and isinstance(max, scalar):
        lo = -np.inf if min is None else float(min)
        hi = np.inf if max is None else float(max)
        return MATH_FUNCTIONS["clip"](x, min=lo, max=hi)
    y = x if min is None else maximum(x, min)
    return y if max is None else minimum(y, max)


def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any) -> Tensor:
    """TensorFlow's name for :func:`clip`."""
    return clip(t, clip_value_min, clip_value_max)


def log_softmax(x: Any, axis: int = -1) -> Tensor:
    """``x - logsumexp(x)`` along ``axis`` (floating point; stable)."""
    return _catalogue_op("log_softmax", (x,), {"axis": int(axis)})  # type: ignore[no-any-return]


def one_hot(indices: Any, depth: int, on_value: Any = 1.0, off_value: Any = 0.0,
            axis: int = -1, dtype: Any = np.float32) -> Tensor:
    """``on_value`` at each index along a new axis of size ``depth``, else ``off_value``
    (out-of-range indices give a row of ``off_value``, as TF)."""
    dt = dtype_to_numpy(dtype)
    return _catalogue_op("one_hot", (indices, np.asarray(int(depth), np.int64),  # type: ignore[no-any-return]
                                     np.asarray(on_value, dt), np.asarray(off_value, dt)),
                         {"axis": int(axis)})


def gather(x: Any, indices: Any, axis: int = 0) -> Tensor:
    """The slices of ``x`` at ``indices`` along ``axis`` (``np.take``; negative indices count
    from the end)."""
    return _catalogue_op("gather", (x, indices), {"axis": int(axis), "batch_dims": 0})  # type: ignore[no-any-return]


def _like(x: Any, value: float, dtype: Any) -> Tensor:
    tb = _traced((x,))
    if tb is not None:
        return tb._trace_eager("eager.fill_like", (x,), {"value": value, "dtype": dtype}, 1)  # type: ignore[no-any-return]
    a = np.asarray(_host_operand(x))
    return _available(np.full(a.shape, value, a.dtype if dtype is None else dtype_to_numpy(dtype)))


def zeros_like(x: Any, dtype: Any = None) -> Tensor:
    """Zeros of ``x``'s shape (and dtype, unless ``dtype``); no gradient flows through."""
    return _like(x, 0, dtype)


def ones_like(x: Any, dtype: Any = None) -> Tensor:
    """Ones of ``x``'s shape (and dtype, unless ``dtype``); no gradient flows through."""
    return _like(x, 1, dtype)


# -- NumPy's protocols: np.tanh(t), np.sum(t), ... on eager and traced tensors ---------------


def _unwrap(v: Any) -> Any:
    """``v`` with eager Tensors (also inside lists and tuples) replaced by ndarrays."""
    if isinstance(v, Tensor):
        return v.numpy()
    if isinstance(v, (list, tuple)):
        return type(v)(_unwrap(e) for e in v)
    return v


def _has_traced(v: Any) -> bool:
    if isinstance(v, TracedBase):
        return True
    if isinstance(v, (list, tuple)):
        return any(_has_traced(e) for e in v)
    return False


def nearest_op(name: str) -> str | None:
    """The ``pytfrt.eager`` function whose name is nearest to ``name`` (``None``: none is)."""
    import difflib

    names = [n for n in __all__ if n[0].islower() and callable(globals().get(n))]
    found = difflib.get_close_matches(name.rsplit(".", 1)[-1], names, n=1, cutoff=0.6)
    return found[0] if found else None


def _unsupported(what: str, args: Any, call: Callable[[], Any]) -> Any:
    """``call()`` on host values, or -- when an argument is traced -- an error naming the
    NumPy function and the nearest eager op."""
    if not _has_traced(args):
        return call()
    near = nearest_op(what)
    hint = f"; the nearest pytfrt.eager op is eager.{near}" if near else ""
    raise EagerOpError(f"{what} is not supported on traced tensors (pytfrt.eager implements "
                       f"the NumPy functions listed in docs/eager.md){hint} (called at "
                       f"{_call_site()})")


def _reduction(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def np_fn(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
              keepdims: Any = False, **kw: Any) -> Tensor:
        if dtype is not None or out is not None or kw:
            raise EagerOpError(f"{fn.__name__}: NumPy's dtype/out/where/initial arguments are "
                               f"not supported (called at {_call_site()})")
        return fn(a, axis, bool(keepdims))

    return np_fn


def _np_where(cond: Any, x: Any = None, y: Any = None) -> Any:
    if x is None or y is None:
        return _unsupported("numpy.where (one argument)", (cond,),
                            lambda: np.where(_unwrap(cond)))
    return where(cond, x, y)


def _ndim(a: Any) -> int:
    """``a``'s rank, read from a tensor's (or traced value's) own shape, never its data."""
    nd = getattr(a, "ndim", None)
    return int(nd) if nd is not None else int(np.ndim(a))


def _np_ufuncs() -> dict[str, Callable[..., Any]]:
    table: dict[str, Callable[..., Any]] = {"matmul": matmul}
    for m in MATH.values():
        for npname in m.numpy:
            table[npname] = MATH_FUNCTIONS[m.name]
    # NumPy ufuncs written with the ops above (the same result up to rounding).
    ln2 = float(np.log(2.0))
    table.setdefault("arctan", lambda x: MATH_FUNCTIONS["atan2"](x, ones_like(x)))
    table.setdefault("exp2", lambda x: exp(multiply(x, ln2)))
    table.setdefault("log2", lambda x: divide(log(x), ln2))
    table.setdefault("log10", lambda x: divide(log(x), float(np.log(10.0))))
    table.setdefault("logaddexp", lambda a, b: add(
        maximum(a, b), MATH_FUNCTIONS["log1p"](exp(neg(abs(subtract(a, b)))))))
    return table


def _np_dot(a: Any, b: Any, out: Any = None) -> Any:
    na, nb = _ndim(a), _ndim(b)
    if out is None and na == 2 and nb == 2:
        return matmul(a, b)
    if out is None and na == 1 and nb == 1:
        return reduce_sum(multiply(a, b))
    if out is None and na == 2 and nb == 1:
        return reshape(matmul(a, reshape(b, [-1, 1])), [-1])
    if out is None and na == 1 and nb == 2:
        return reshape(matmul(reshape(a, [1, -1]), b), [-1])
    return _unsupported("numpy.dot (beyond 1-D and 2-D operands)", (a, b),
                        lambda: np.dot(_unwrap(a), _unwrap(b)))


def _np_var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
            keepdims: bool = False, **kw: Any) -> Any:
    if dtype is not None or out is not None or kw:
        raise EagerOpError(f"numpy.var: the dtype/out/where arguments are not supported "
                           f"(called at {_call_site()})")
    centred = subtract(a, reduce_mean(a, axis, True))
    v = reduce_mean(multiply(centred, centred), axis, bool(keepdims))
    if ddof:
        shape = a.shape
        axes = range(len(shape)) if axis is None else (
            [axis] if isinstance(axis, int) else list(axis))
        n = int(np.prod([shape[i] for i in axes]))
        v = multiply(v, n / (n - ddof))
    return v


def _np_argmax(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False,
               negate: bool = False) -> Any:
    if out is not None or keepdims:
        raise EagerOpError(f"numpy.argmax/argmin: out/keepdims are not supported (called at "
                           f"{_call_site()})")
    x = neg(a) if negate else a
    if axis is None:
        return argmax(reshape(x, [-1]), 0)
    return argmax(x, axis % _ndim(a))


def _np_stack(arrays: Sequence[Any], axis: int = 0, **kw: Any) -> Any:
    axis = axis % (_ndim(arrays[0]) + 1)
    return concat([expand_dims(x, axis) for x in arrays], axis)


def _np_hstack(arrays: Sequence[Any], **kw: Any) -> Any:
    return concat(list(arrays), 0 if _ndim(arrays[0]) == 1 else 1)


def _np_vstack(arrays: Sequence[Any], **kw: Any) -> Any:
    return concat([reshape(x, [1, -1]) if _ndim(x) == 1 else x for x in arrays], 0)


def _np_norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A002
    if ord is not None:
        return _unsupported(f"numpy.linalg.norm (ord={ord!r})", (x,),
                            lambda: np.linalg.norm(_unwrap(x), ord, axis, keepdims))
    return MATH_FUNCTIONS["sqrt"](reduce_sum(multiply(x, x), axis, bool(keepdims)))


def _np_average(a: Any, axis: Any = None, weights: Any = None, **kw: Any) -> Any:
    if weights is not None or kw:
        return _unsupported("numpy.average (weights)", (a, weights),
                            lambda: np.average(_unwrap(a), axis, _unwrap(weights), **kw))
    return reduce_mean(a, axis)


def _np_functions() -> dict[Any, Callable[..., Any]]:
    return {
        np.sum: _reduction(reduce_sum), np.mean: _reduction(reduce_mean),
        np.max: _reduction(reduce_max), np.min: _reduction(reduce_min),
        np.amax: _reduction(reduce_max), np.amin: _reduction(reduce_min),
        np.where: _np_where, np.dot: _np_dot,
        np.clip: lambda a, a_min=None, a_max=None, **kw: clip(
            a, kw.get("min", a_min), kw.get("max", a_max)),
        np.reshape: lambda a, newshape=None, shape=None, **kw: reshape(
            a, shape if shape is not None else newshape),
        np.transpose: lambda a, axes=None: transpose(a, axes),
        np.expand_dims: lambda a, axis: expand_dims(a, axis),
        np.squeeze: lambda a, axis=None: squeeze(a, axis),
        np.concatenate: lambda arrays, axis=0, **kw: concat(arrays, axis),
        np.broadcast_to: lambda a, shape, **kw: broadcast_to(
            a, (shape,) if isinstance(shape, int) else shape),
        np.zeros_like: lambda a, dtype=None, **kw: zeros_like(a, dtype),
        np.ones_like: lambda a, dtype=None, **kw: ones_like(a, dtype),
        np.take: lambda a, indices, axis=None, **kw: gather(
            a if axis is not None else reshape(a, [-1]), indices, 0 if axis is None else axis),
        np.round: lambda a, decimals=0, **kw: MATH_FUNCTIONS["round"](a) if decimals == 0
        else _unsupported("numpy.round (decimals)", (a,), lambda: np.round(_unwrap(a), decimals)),
        np.ndim: _ndim,
        np.shape: lambda a: tuple(a.shape),
        np.argmax: _np_argmax,
        np.argmin: lambda a, axis=None, out=None, **kw: _np_argmax(a, axis, out, negate=True,
                                                                     **kw),
        np.stack: _np_stack, np.hstack: _np_hstack, np.vstack: _np_vstack,
        np.ravel: lambda a, order="C": reshape(a, [-1]),
        np.outer: lambda a, b, out=None: multiply(reshape(a, [-1, 1]), reshape(b, [1, -1])),
        np.var: _np_var,
        np.std: lambda a, *args, **kw: MATH_FUNCTIONS["sqrt"](_np_var(a, *args, **kw)),
        np.average: _np_average,
        np.linalg.norm: _np_norm,
    }


_NP_TABLES: list[Any] = []


def _array_ufunc(self: Any, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """NumPy's ``__array_ufunc__``: a ufunc the op definitions implement runs as that op (an
    eager Tensor on host values, a traced op under ``@pytfrt.function``); others compute in
    NumPy on host values and raise :class:`EagerOpError` for traced values."""
    if not _NP_TABLES:
        _NP_TABLES[:] = [_np_ufuncs(), _np_functions()]
    fn = _NP_TABLES[0].get(ufunc.__name__) if method == "__call__" else None
    if fn is not None and kwargs.get("out") is None and kwargs.get("where", True) is True \
            and kwargs.get("dtype") is None:
        return fn(*inputs)
    what = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    call = ufunc if method == "__call__" else getattr(ufunc, method)
    return _unsupported(what, (inputs, list(kwargs.values())),
                        lambda: call(*_unwrap(inputs), **{k: _unwrap(v)
                                                          for k, v in kwargs.items()}))


def _array_function(self: Any, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    """NumPy's ``__array_function__`` (``np.sum``, ``np.where``, ``np.reshape``...; the list is
    in docs/eager.md), with the fallback of :func:`_array_ufunc`."""
    if not _NP_TABLES:
        _NP_TABLES[:] = [_np_ufuncs(), _np_functions()]
    fn = _NP_TABLES[1].get(func)
    if fn is not None:
        return fn(*args, **kwargs)
    where = getattr(func, "__module__", None) or "numpy"  # numpy, numpy.linalg, numpy.fft
    return _unsupported(f"{where}.{func.__name__}", (args, list(kwargs.values())),
                        lambda: func(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}))


def _transpose_method(self: Any, *axes: Any) -> Any:
    perm = axes[0] if len(axes) == 1 and isinstance(axes[0], tuple | list) else axes
    return transpose(self, list(perm) if perm else None)


_NUMPY_METHODS: dict[str, Callable[..., Any]] = {
    "sum": lambda self, axis=None, keepdims=False: reduce_sum(self, axis, keepdims),
    "mean": lambda self, axis=None, keepdims=False: reduce_mean(self, axis, keepdims),
    "max": lambda self, axis=None, keepdims=False: reduce_max(self, axis, keepdims),
    "min": lambda self, axis=None, keepdims=False: reduce_min(self, axis, keepdims),
    "argmax": lambda self, axis=None: _np_argmax(self, axis),
    "argmin": lambda self, axis=None: _np_argmax(self, axis, negate=True),
    "var": _np_var,
    "std": lambda self, *args, **kw: MATH_FUNCTIONS["sqrt"](_np_var(self, *args, **kw)),
    "ravel": lambda self: reshape(self, [-1]),
    "flatten": lambda self: reshape(self, [-1]),
    "squeeze": lambda self, axis=None: squeeze(self, axis),
    "transpose": _transpose_method,
}
"""ndarray methods of eager Tensors and traced values (``x.max(axis=1)``, ``x.ravel()``), each
the NumPy function of the same name; a class's own method of that name is kept."""

for _cls in (Tensor, TracedBase):
    setattr(_cls, "__array_ufunc__", _array_ufunc)  # noqa: B010 - after the functions it uses
    setattr(_cls, "__array_function__", _array_function)  # noqa: B010
    for _name, _method in _NUMPY_METHODS.items():
        if not hasattr(_cls, _name):
            setattr(_cls, _name, _method)


def async_copy(x: Any) -> Tensor:
    """A copy of ``x`` made by a task on the work queue (a future tensor; for testing)."""
    return _dispatch("tfrt_test.async.noop", (x,), EMPTY_ATTRS)  # type: ignore[no-any-return]


def wait(tensors: Sequence[TensorHandle]) -> None:
    """Block until every tensor in ``tensors`` is available."""
    pending = [t.tensor_av for t in tensors if not t.is_available()]
    if pending:
        runtime().host.await_values(pending)


__all__ = [
    "EagerOpError",
    "TensorRef",
    "TracedBase",
    "arange",
    "as_array",
    "call_site",
    "dtype_to_numpy",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "not_equal",
    "ones",
    "pow",
    "random_normal",
    "random_uniform",
    "result_dtype",
    "zeros",
    "EagerRuntimeError",
    "ExecutionContext",
    "Tensor",
    "abs",
    "add",
    "argmax",
    "async_copy",
    "broadcast_to",
    "c_fast_path_enabled",
    "cast",
    "concat",
    "configure",
    "constant",
    "core_runtime",
    "divide",
    "equal",
    "execute",
    "exp",
    "expand_dims",
    "fast_path_counts",
    "log",
    "matmul",
    "maximum",
    "minimum",
    "multiply",
    "neg",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_sum",
    "relu",
    "request",
    "reshape",
    "runtime",
    "sigmoid",
    "softmax",
    "sqrt",
    "square",
    "squeeze",
    "subtract",
    "tanh",
    "transpose",
    "use_c_fast_path",
    "wait",
]
__all__ += [
    "MATH_FUNCTIONS", "clip", "clip_by_value", "gather", "log_softmax", "nearest_op", "one_hot",
    "ones_like", "where", "zeros_like",
    *sorted({m.eager for m in MATH.values() if m.eager} - set(__all__)),
]
