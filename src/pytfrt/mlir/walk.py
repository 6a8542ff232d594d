"""Walking nested IR without recursion, and running recursive phases on a deep stack.

Region nesting has no Python-sized limit in pytfrt (docs/security.md, "Limits"):

* :func:`walk_ops` visits every op nested in an op in the order of xDSL's ``Operation.walk``
  (pre-order, or regions first), with an explicit stack: constant Python stack and linear time
  whatever the depth (xDSL's ``walk`` nests one generator per level, so each step costs time
  proportional to the depth and ten thousand levels take minutes);
* :func:`call_with_deep_stack` runs a function on a helper thread with a large stack and a
  raised recursion limit, for the one phase that must recurse per level: xDSL's parser.

Both are thread-safe.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from xdsl.ir import Operation

T = TypeVar("T")

#: The helper thread's stack (virtual memory; only the pages used are committed).  The parser
#: needs about 10 Python frames and under 2 KiB of C stack per region level (measured with
#: nested ``tfrt.if``); this leaves a wide margin at :data:`DEEP_RECURSION_LIMIT` frames.
DEEP_STACK_BYTES = 512 * 1024 * 1024
#: The recursion limit while a deep call runs (Python's limit is process-wide).
DEEP_RECURSION_LIMIT = 600_000

_limit_lock = threading.Lock()
_active = 0
_saved_limit = 0


def _children(op: Operation) -> Iterator[Operation]:
    for region in op.regions:
        for block in region.blocks:
            yield from block.ops


def walk_ops(root: Operation, *, region_first: bool = False) -> Iterator[Operation]:
    """Every op nested in ``root``, ``root`` included, in ``root.walk(...)``'s order.

    ``region_first``: an op comes after the ops of its regions (post-order).  The IR must not
    be restructured while the walk runs (changing attributes is fine)."""
    if not region_first:
        yield root
        stack = [_children(root)]
        while stack:
            op = next(stack[-1], None)
            if op is None:
                stack.pop()
                continue
            yield op
            if op.regions:
                stack.append(_children(op))
        return
    frames: list[tuple[Operation, Iterator[Operation]]] = [(root, _children(root))]
    while frames:
        op, children = frames[-1]
        child = next(children, None)
        if child is None:
            frames.pop()
            yield op
        elif child.regions:
            frames.append((child, _children(child)))
        else:
            yield child


def stack_depth() -> int:
    """The number of Python frames on the calling thread's stack."""
    frame = sys._getframe(1)
    depth = 1
    while frame.f_back is not None:
        frame = frame.f_back
        depth += 1
    return depth


def call_with_deep_stack(fn: Callable[[], T]) -> T:
    """``fn()`` on a new thread with a :data:`DEEP_STACK_BYTES` stack; its result or exception.

    While any such call runs, Python's recursion limit (one value for the whole process) is
    raised to :data:`DEEP_RECURSION_LIMIT`; the last call to finish restores the value seen by
    the first.  Other threads keep their own (smaller) stacks, so a runaway recursion elsewhere
    during that time overflows later than usual.  Raises ``RuntimeError`` if the system refuses
    a thread with that stack."""
    global _active, _saved_limit
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            failure.append(exc)

    with _limit_lock:
        if _active == 0:
            _saved_limit = sys.getrecursionlimit()
        _active += 1
        sys.setrecursionlimit(max(_saved_limit, DEEP_RECURSION_LIMIT))
    try:
        thread = _start(run)
        thread.join()
    finally:
        with _limit_lock:
            _active -= 1
            if _active == 0:
                sys.setrecursionlimit(_saved_limit)
    if failure:
        raise failure[0]
    return outcome[0]


def _start(target: Callable[[], None]) -> threading.Thread:
    with _limit_lock:  # threading.stack_size is process-wide too
        previous = threading.stack_size()
        try:
            threading.stack_size(DEEP_STACK_BYTES)
            thread = threading.Thread(target=target, name="pytfrt-deep-stack", daemon=True)
            thread.start()
        except (RuntimeError, ValueError, MemoryError) as exc:
            raise RuntimeError(
                f"cannot start a thread with a {DEEP_STACK_BYTES >> 20} MiB stack: {exc}"
            ) from None
        finally:
            threading.stack_size(previous)
    return thread
