"""AsyncValue: TFRT's future and promise in one object, plus Chain and the ``make_*`` helpers.

State machine (docs/host.md)::

    UNCONSTRUCTED --construct()--> CONSTRUCTED --set_state_concrete()--> CONCRETE
    UNCONSTRUCTED --emplace()----------------------------------------->  CONCRETE
    UNCONSTRUCTED | CONSTRUCTED --set_error()------------------------->  ERROR

CONCRETE and ERROR are terminal; ``is_available()`` is true in either.

Guarantees:
* Thread-safe without a lock on the hot path: waiters are only ever taken out of the value's
  waiter list with ``list.pop()`` (one atomic step), and both the producer (after publishing the
  state) and a consumer that sees the state change after appending drain the list, so no
  wake-up is lost or doubled (see :class:`AsyncValue`; proven by the stress tests).
* ``and_then(f)`` runs ``f`` at once, in the caller, if the value is available; otherwise ``f``
  runs exactly once in the thread that makes the value available, after the lock is released.
  Waiters registered before availability run in reverse order of registration (LIFO), as TFRT's
  lock-free waiter list does.
* A waiter cannot tell CONCRETE from ERROR except by asking the value.
* Waiter exceptions are not swallowed silently: they propagate to the thread that published
  the value after all other waiters have run (the first one is re-raised).
* Bounded stack: waiters that make further values available nest on the thread's stack.  Once
  :data:`MAX_NESTING` such levels (counted together with the executor's nested invocations and
  continuations, see :func:`run_nested`) are active on a thread, further work is deferred to
  the outermost level, which runs it before it returns.  Chains of any length (indirect values
  forwarded to indirect values, continuations resuming continuations) therefore run in
  constant Python stack.

Reference counting is explicit, as in TFRT, because it is observable (values die right after
their last consumer, ``is_unique``): a value starts with one reference; ``add_ref``/``drop_ref``
move the count; when it reaches zero the payload's ``__tfrt_destroy__()`` (if it has one) is
called.  Python's own memory management frees the object; the count only drives those hooks
and ``is_unique``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Generic, TypeVar

from pytfrt.support.errors import PytfrtError, Status

T = TypeVar("T")

UNCONSTRUCTED: Final = 0
CONSTRUCTED: Final = 1
CONCRETE: Final = 2
ERROR: Final = 3

_STATE_NAMES: Final = ("unconstructed", "constructed", "concrete", "error")

MAX_NESTING: Final = 32
"""How many :func:`run_nested` levels may be active on one thread before work is deferred.

Each level costs about a dozen Python frames (an executor invocation, a continuation, a waiter
cascade), so 32 levels stay far below Python's default recursion limit of 1000."""


class _Nesting(threading.local):
    """Per-thread trampoline state: the active level count and the deferred work."""

    depth = 0
    deferred: deque[Callable[[], None]] | None = None


_nesting: Final = _Nesting()


def run_nested(fn: Callable[[], None]) -> None:
    """Run ``fn()`` now, or -- if :data:`MAX_NESTING` levels are active on this thread -- defer it.

    Deferred work runs on the same thread, in FIFO order, just before the outermost active
    level returns, each item at a shallow depth again (so it may nest and defer in turn).  This
    is the trampoline that keeps arbitrarily long dependency chains in constant stack.  An
    exception raised by ``fn`` (or deferred work) propagates to the caller of the outermost
    level, after every deferred item has run (the first one is re-raised).
    """
    state = _nesting
    depth = state.depth
    if depth >= MAX_NESTING:
        deferred = state.deferred
        if deferred is None:
            deferred = state.deferred = deque()
        deferred.append(fn)
        return
    state.depth = depth + 1
    try:
        fn()
    finally:
        state.depth = depth
        if depth == 0 and state.deferred:
            _drain(state)


def _drain(state: _Nesting) -> None:
    """Run the deferred work of this thread (called by the outermost level only)."""
    deferred = state.deferred
    assert deferred is not None
    first_exc: BaseException | None = None
    while deferred:
        fn = deferred.popleft()
        state.depth = 1
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            if first_exc is None:
                first_exc = exc
        finally:
            state.depth = 0
    if first_exc is not None:
        raise first_exc


def nesting_depth() -> int:
    """The number of :func:`run_nested` levels active on the calling thread (for tests)."""
    return _nesting.depth


class AsyncValueError(PytfrtError):
    """An illegal state transition or an access to a value that is not concrete."""


class AsyncValue(Generic[T]):
    """A value that may not be available yet: a payload of type ``T``, or an error.

    Producers call :meth:`emplace`, :meth:`construct` + :meth:`set_state_concrete`, or
    :meth:`set_error` exactly once.  Consumers call :meth:`and_then` and then :meth:`get` /
    :meth:`error`.  Use the ``make_*`` helpers below to create values in a given state.

    How wake-ups stay exact without a lock: waiters are appended to a list that is created
    with the value, and are only ever taken out with ``list.pop()``, a single atomic step.
    The producer publishes the state and then pops waiters until the list is empty; a
    consumer appends its waiter and then re-reads the state, and if the value became available
    meanwhile it pops too.  Every appended waiter is therefore popped -- and run -- exactly
    once, by whichever thread pops it; popping from the end gives TFRT's LIFO order.
    """

    __slots__ = ("_state", "_value", "_waiters", "_refs", "__weakref__")

    def __init__(self) -> None:
        self._state: int = UNCONSTRUCTED
        self._value: Any = None
        self._waiters: list[Callable[[], None]] = []
        self._refs: list[bool] = [True]  # reference tokens, see add_ref

    # -- state queries (lock-free: a terminal state never changes once observed) ------------

    @property
    def state(self) -> str:
        """The state name: ``unconstructed``, ``constructed``, ``concrete`` or ``error``."""
        return _STATE_NAMES[self._state]

    def is_available(self) -> bool:
        """True if the value is concrete or an error."""
        return self._state >= CONCRETE

    def is_unavailable(self) -> bool:
        """True if the value is neither concrete nor an error yet."""
        return self._state < CONCRETE

    def is_concrete(self) -> bool:
        """True if the payload has been published."""
        return self._state == CONCRETE

    def is_error(self) -> bool:
        """True if the value holds an error."""
        return self._state == ERROR

    def is_constructed(self) -> bool:
        """True if the payload exists but is not yet published."""
        return self._state == CONSTRUCTED

    def is_indirect(self) -> bool:
        """True for :class:`IndirectAsyncValue`."""
        return False

    def is_unresolved_indirect(self) -> bool:
        """True for an indirect value that has not been forwarded to an available value."""
        return False

    def get(self) -> T:
        """Return the payload. Raises :class:`AsyncValueError` unless the value is concrete."""
        if self._state == CONCRETE:
            return self._value  # type: ignore[no-any-return]
        if self._state == ERROR:
            raise AsyncValueError(f"get() on an error AsyncValue: {self._value.message}")
        raise AsyncValueError(f"get() on an AsyncValue in state {self.state}")

    def get_constructed(self) -> T:
        """Return the payload of a CONSTRUCTED (not yet published) value, for its producer."""
        if self._state not in (CONSTRUCTED, CONCRETE):
            raise AsyncValueError(f"payload not constructed (state {self.state})")
        return self._value  # type: ignore[no-any-return]

    @property
    def error(self) -> Status:
        """The error status. Raises :class:`AsyncValueError` unless the value is an error."""
        if self._state != ERROR:
            raise AsyncValueError(f"error on an AsyncValue in state {self.state}")
        return self._value  # type: ignore[no-any-return]

    def get_error_or_none(self) -> Status | None:
        """The error status if the value is an error, else ``None``."""
        return self._value if self._state == ERROR else None

    # -- producers (each value has exactly one producer; a second publish raises) ----------

    def emplace(self, value: T) -> None:
        """Publish ``value`` (UNCONSTRUCTED -> CONCRETE) and run the waiters."""
        if self._state != UNCONSTRUCTED:
            raise AsyncValueError(f"emplace() on an AsyncValue in state {self.state}")
        self._value = value
        self._state = CONCRETE
        if self._waiters:
            self._run_waiters()

    def construct(self, value: T) -> None:
        """Store ``value`` without publishing it (UNCONSTRUCTED -> CONSTRUCTED)."""
        if self._state != UNCONSTRUCTED:
            raise AsyncValueError(f"construct() on an AsyncValue in state {self.state}")
        self._value = value
        self._state = CONSTRUCTED

    def set_state_concrete(self) -> None:
        """Publish the constructed payload (CONSTRUCTED -> CONCRETE) and run the waiters."""
        if self._state != CONSTRUCTED:
            raise AsyncValueError(f"set_state_concrete() on an AsyncValue in state {self.state}")
        self._state = CONCRETE
        if self._waiters:
            self._run_waiters()

    def set_error(self, error: Status | str) -> None:
        """Make this value an error (from UNCONSTRUCTED or CONSTRUCTED) and run the waiters.

        A plain string becomes an ``INTERNAL`` :class:`Status`.
        """
        if self._state >= CONCRETE:
            raise AsyncValueError(f"set_error() on an AsyncValue in state {self.state}")
        self._value = error if isinstance(error, Status) else Status(str(error))
        self._state = ERROR
        if self._waiters:
            self._run_waiters()

    def _run_waiters(self) -> None:
        """Run the waiters as one :func:`run_nested` level (see the module docstring)."""
        run_nested(self._run_waiters_now)

    def _run_waiters_now(self) -> None:
        """Pop and run waiters until none is left (LIFO); re-raise the first exception."""
        waiters = self._waiters
        first_exc: BaseException | None = None
        while waiters:
            try:
                waiter = waiters.pop()
            except IndexError:  # another thread took the last one
                break
            try:
                waiter()
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                if first_exc is None:
                    first_exc = exc
        if first_exc is not None:
            raise first_exc

    # -- consumers --------------------------------------------------------------------------

    def and_then(self, waiter: Callable[[], None]) -> None:
        """Run ``waiter()`` once this value is available (at once if it already is)."""
        if self._state >= CONCRETE:
            waiter()
            return
        self._waiters.append(waiter)
        if self._state >= CONCRETE:
            # Published between our check and our append: the producer may have drained
            # the list already, so drain it ourselves (pop() hands each waiter out once).
            self._run_waiters()

    # -- reference counting -------------------------------------------------------------------

    # The count is a list of tokens, one per reference: the bottom one is ``True``, every
    # added one ``False``.  ``append``/``extend`` add references and ``pop()`` drops one, each a
    # single atomic step, so the decrement-and-test needs no lock: exactly one ``pop()`` -- the
    # one that drops the last reference -- receives the ``True`` token.

    def add_ref(self, count: int = 1) -> AsyncValue[T]:
        """Add ``count`` references; returns ``self`` for chaining."""
        if count == 1:
            self._refs.append(False)
        elif count > 0:
            self._refs.extend([False] * count)
        return self

    def drop_ref(self, count: int = 1) -> None:
        """Drop ``count`` references; at zero the payload's ``__tfrt_destroy__`` hook runs."""
        refs = self._refs
        try:
            if count == 1:
                last = refs.pop()
            else:
                if count > len(refs):
                    raise IndexError
                last = False
                for _ in range(count):
                    if refs.pop():
                        last = True
        except IndexError:
            raise AsyncValueError("AsyncValue reference count dropped below zero") from None
        if last:
            self._destroy()

    def _destroy(self) -> None:
        if self._state in (CONCRETE, CONSTRUCTED):
            hook = getattr(self._value, "__tfrt_destroy__", None)
            if hook is not None:
                hook()

    @property
    def ref_count(self) -> int:
        """The current explicit reference count (for tests and ``is_unique``)."""
        return len(self._refs)

    def is_unique(self) -> bool:
        """True if exactly one reference is held and the value is not indirect."""
        return len(self._refs) == 1

    def __repr__(self) -> str:
        if self._state == CONCRETE:
            return f"AsyncValue(concrete: {self._value!r})"
        if self._state == ERROR:
            return f"AsyncValue(error: {self._value.message!r})"
        return f"AsyncValue({self.state})"


_REF_LOCKS: Final = [threading.Lock() for _ in range(64)]


def _ref_lock(value: object) -> threading.Lock:
    """A striped lock for ``value`` (guards the one-time ``forward_to`` check)."""
    return _REF_LOCKS[(id(value) >> 4) & 63]


class IndirectAsyncValue(AsyncValue[T]):
    """A placeholder forwarded later to another value with :meth:`forward_to` (docs/host.md).

    Once the target is available, this value takes the target's state and payload and runs
    its own waiters.  ``set_error`` on an unresolved indirect value forwards it to a new error
    value.  Indirect values never report ``is_unique()``.
    """

    __slots__ = ("_target", "_forwarded")

    def __init__(self) -> None:
        super().__init__()
        self._target: AsyncValue[T] | None = None
        self._forwarded = False

    def is_indirect(self) -> bool:
        return True

    def is_unresolved_indirect(self) -> bool:
        return self._state < CONCRETE

    def is_unique(self) -> bool:
        return False

    @property
    def target(self) -> AsyncValue[T] | None:
        """The value this one was forwarded to (unwrapped), or ``None``."""
        return self._target

    def forward_to(self, target: AsyncValue[T]) -> None:
        """Forward to ``target`` (callable once); resolves when ``target`` is available.

        Takes over one reference to ``target`` from the caller.
        """
        if target is self:
            raise AsyncValueError("an IndirectAsyncValue cannot be forwarded to itself")
        if not self.try_forward_to(target):
            raise AsyncValueError("forward_to() called twice on an IndirectAsyncValue")

    def try_forward_to(self, target: AsyncValue[T]) -> bool:
        """:meth:`forward_to` unless this value was forwarded already; True if it forwarded.

        For two racing producers (a result and its cancellation): exactly one wins, atomically.
        The loser keeps its reference to ``target``.
        """
        with _ref_lock(self):
            if self._forwarded or self._state >= CONCRETE:
                return False
            self._forwarded = True
        target.and_then(lambda: self._adopt(target))
        return True

    def _adopt(self, target: AsyncValue[T]) -> None:
        forwarded = target
        while isinstance(target, IndirectAsyncValue) and target._target is not None:
            target = target._target
        if target is not forwarded:
            # We own a reference to ``forwarded``; move it to the unwrapped target (docs/host.md).
            target.add_ref()
            forwarded.drop_ref()
        self._target = target
        self._value = target._value
        self._state = target._state
        if self._waiters:
            self._run_waiters()

    def emplace(self, value: T) -> None:
        """Publish a payload directly (as if forwarded to an available concrete value)."""
        self.forward_to(make_available(value))

    def set_error(self, error: Status | str) -> None:
        """Forward to a new error value (docs/host.md)."""
        self.forward_to(make_error(error))

    def _destroy(self) -> None:
        # The indirect value owns one reference to its target (docs/host.md).
        if self._target is not None:
            self._target.drop_ref()


# -- Chain ---------------------------------------------------------------------------------------


class Chain:
    """The empty value that orders side effects (docs/host.md). There is one instance, ``CHAIN``."""

    __slots__ = ()

    _instance: Chain | None = None

    def __new__(cls) -> Chain:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "Chain()"


CHAIN: Final = Chain()


# -- helpers (TFRT's Make*AsyncValueRef) ---------------------------------------------------------


def make_available(value: T) -> AsyncValue[T]:
    """A CONCRETE value holding ``value`` (``MakeAvailableAsyncValueRef``).

    On the executor's hot path (one per kernel result), so it fills the slots itself instead
    of running ``AsyncValue.__init__`` and then changing them: keep it in step with
    ``__init__`` (a unit test compares the two).
    """
    av: AsyncValue[T] = _new_object(AsyncValue)
    av._state = CONCRETE
    av._value = value
    av._waiters = []
    av._refs = [True]
    return av


_new_object: Final = object.__new__


def make_unconstructed() -> AsyncValue[Any]:
    """An UNCONSTRUCTED value to be filled later (``MakeUnconstructedAsyncValueRef``)."""
    return AsyncValue()


def make_constructed(value: T) -> AsyncValue[T]:
    """A CONSTRUCTED value; its producer publishes it with ``set_state_concrete()``."""
    av: AsyncValue[T] = AsyncValue()
    av._value = value
    av._state = CONSTRUCTED
    return av


def make_error(error: Status | str) -> AsyncValue[Any]:
    """An ERROR value (``MakeErrorAsyncValueRef``); a string becomes an INTERNAL status."""
    av: AsyncValue[Any] = AsyncValue()
    av._value = error if isinstance(error, Status) else Status(str(error))
    av._state = ERROR
    return av


def make_indirect() -> IndirectAsyncValue[Any]:
    """An unresolved :class:`IndirectAsyncValue` (``MakeIndirectAsyncValue``)."""
    return IndirectAsyncValue()


def make_ready_chain() -> AsyncValue[Chain]:
    """An available chain (kernels returning ``Chain`` by value produce one)."""
    return make_available(CHAIN)


def run_when_ready(values: Sequence[AsyncValue[Any]], callback: Callable[[], None]) -> None:
    """Run ``callback`` once every value in ``values`` is available (errors count).

    Runs at once, in the caller, if all are available; otherwise in the thread that makes the
    last one available.  The counter of pending values is protected by a lock.
    """
    pending = [v for v in values if v._state < CONCRETE]
    if not pending:
        callback()
        return
    if len(pending) == 1:
        pending[0].and_then(callback)
        return
    # One token per pending value; list.pop() under a lock is the decrement-and-test.
    lock = threading.Lock()
    remaining = [len(pending)]

    def on_one() -> None:
        with lock:
            remaining[0] -= 1
            done = remaining[0] == 0
        if done:
            callback()

    for value in pending:
        value.and_then(on_one)


def all_available(values: Iterable[AsyncValue[Any]]) -> bool:
    """True if every value is available."""
    return all(v._state >= CONCRETE for v in values)
