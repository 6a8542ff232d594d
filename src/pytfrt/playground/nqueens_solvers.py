"""The N-Queens solvers shared by the ``nqueens.i32`` kernel and every baseline.

One algorithm, the original playground's (docs/nqueens.md): place one queen per column, left to
right; a queen at ``(col, row)`` is legal if no earlier queen shares its row or a diagonal
(``board[c] == row or |board[c] - row| == col - c``); count the complete boards by plain
recursive backtracking.  No bitboards, no symmetry folding: the point of the benchmark is the
scheduling cost, so every variant must do the same work.

Two implementations of the subtree count are offered, chosen by name (:func:`get_solver`):

* ``"numba"`` -- compiled with ``numba.njit(nogil=True, cache=True)``: it releases the
  interpreter lock, so tasks run in parallel on ``mstd`` worker threads.  Numba is imported on
  first use only.  The compiled code is cached in ``__pycache__`` next to this file; if that
  directory (and Numba's user-wide fallback) is not writable, the solver is compiled without a
  cache instead of failing.
* ``"python"`` -- the same recursion in pure Python (holds the interpreter lock; for comparison
  and for fast tests at small ``n``).

A *placement* is a tuple of rows for columns ``0..len(placement)-1``.  Every solver is a
callable ``solve(n, placement) -> int`` counting the complete boards that extend the placement.
All functions here are pure and thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, Final

Placement = tuple[int, ...]
Solver = Callable[[int, Placement], int]

SOLVER_NAMES: Final = ("numba", "python")

KNOWN_COUNTS: Final = (1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712, 365596)
"""Number of solutions for n = 1, 2, ... 14 (OEIS A000170), the tests' oracle."""


# -- the pure-Python solver ------------------------------------------------------------------


def is_valid(board: Placement | list[int], col: int, row: int) -> bool:
    """True if a queen at ``(col, row)`` is not attacked by the queens in columns ``< col``."""
    for c in range(col):
        placed = board[c]
        if placed == row or abs(placed - row) == col - c:
            return False
    return True


def _solve_python_rec(n: int, col: int, board: list[int]) -> int:
    if col == n:
        return 1
    count = 0
    for row in range(n):
        if is_valid(board, col, row):
            board[col] = row
            count += _solve_python_rec(n, col + 1, board)
    return count


def solve_python(n: int, placement: Placement = ()) -> int:
    """Count the solutions extending ``placement`` (pure Python, holds the GIL)."""
    board = list(placement) + [0] * (n - len(placement))
    return _solve_python_rec(n, len(placement), board)


def children(n: int, placement: Placement) -> list[Placement]:
    """The valid one-column extensions of ``placement``, in row order."""
    col = len(placement)
    return [placement + (row,) for row in range(n) if is_valid(placement, col, row)]


def placements_at(n: int, depth: int) -> Iterator[Placement]:
    """Every valid placement of ``depth`` columns, depth-first in row order."""
    if depth == 0:
        yield ()
        return
    for parent in placements_at(n, depth - 1):
        yield from children(n, parent)


def count_tasks(n: int, levels: int) -> int:
    """Tasks of the schedule ``(n, levels)``: valid placements of depth ``0..levels``.

    The root (depth 0) counts as one task, as in the original C++ thread pool (11,167 for
    n = 14, levels = 4; the original kernel expanded its root inline and created 11,166).
    """
    return sum(sum(1 for _ in placements_at(n, d)) for d in range(levels + 1))


# -- the Numba solver ------------------------------------------------------------------------

_numba_lock = threading.Lock()
_numba_solver: Solver | None = None


def _nb_is_valid(board: Any, col: int, row: int) -> bool:
    """Numba source of :func:`is_valid` (jitted in place by :func:`_compile_numba`)."""
    for c in range(col):
        placed = board[c]
        if placed == row or abs(placed - row) == col - c:
            return False
    return True


def _nb_solve(n: int, col: int, board: Any) -> int:
    """Numba source of the recursive count (jitted in place by :func:`_compile_numba`)."""
    if col == n:
        return 1
    count = 0
    for row in range(n):
        if _nb_is_valid(board, col, row):
            board[col] = row
            count += _nb_solve(n, col + 1, board)
    return count


_NB_SOURCES: Final = (_nb_is_valid, _nb_solve)
"""The plain functions, kept so a second compilation does not jit a dispatcher."""


def _compile_numba() -> Solver:
    """Jit ``_nb_is_valid``/``_nb_solve`` in place and return the wrapping solver.

    The two module globals are replaced by their Numba dispatchers, so the recursion inside
    ``_nb_solve`` resolves to compiled code.  Caller holds ``_numba_lock``.
    """
    global _nb_is_valid, _nb_solve
    import numba
    import numpy as np

    py_is_valid, py_solve = _NB_SOURCES
    try:
        _nb_is_valid = numba.njit(nogil=True, cache=True)(py_is_valid)
        _nb_solve = numba.njit(nogil=True, cache=True)(py_solve)
        _nb_solve(1, 0, np.zeros(1, np.int64))  # compile, or load from the cache, now
    except (RuntimeError, OSError):
        # No writable cache location (read-only checkout, no user cache): compile only.
        _nb_is_valid = numba.njit(nogil=True)(py_is_valid)
        _nb_solve = numba.njit(nogil=True)(py_solve)
        _nb_solve(1, 0, np.zeros(1, np.int64))
    kernel = _nb_solve

    zeros = np.zeros
    int64 = np.int64

    def solve_numba(n: int, placement: Placement = ()) -> int:
        """Count the solutions extending ``placement`` (compiled, releases the GIL)."""
        board = zeros(n, int64)
        col = len(placement)
        board[:col] = placement
        return int(kernel(n, col, board))

    return solve_numba


def numba_available() -> bool:
    """True if Numba can be imported."""
    import importlib.util

    return importlib.util.find_spec("numba") is not None


def get_solver(name: str = "numba") -> Solver:
    """The solver called ``name`` (``"numba"`` or ``"python"``).

    The Numba solver is compiled (or loaded from its cache) on the first request; later
    requests return the same function.  Thread-safe.

    Raises:
        ValueError: for an unknown name, or ``"numba"`` when Numba is not installed.
    """
    global _numba_solver
    if name == "python":
        return solve_python
    if name != "numba":
        raise ValueError(f"unknown N-Queens solver {name!r}; choose from {', '.join(SOLVER_NAMES)}")
    with _numba_lock:
        if _numba_solver is None:
            if not numba_available():
                raise ValueError("the 'numba' N-Queens solver needs Numba, which is not installed")
            _numba_solver = _compile_numba()
        return _numba_solver


def check_arguments(n: int, levels: int) -> None:
    """Validate an ``(n, levels)`` pair with the messages every variant uses.

    Raises:
        ValueError: ``n`` not in ``1..18`` (the count overflows i32 from n = 19), ``levels``
            negative or greater than ``n``.
    """
    if n < 1:
        raise ValueError(f"nqueens: n must be at least 1, got {n}")
    if n > 18:
        raise ValueError(f"nqueens: n must be at most 18 (the i32 count overflows), got {n}")
    if levels < 0:
        raise ValueError(f"nqueens: levels must not be negative, got {levels}")
    if levels > n:
        raise ValueError(f"nqueens: levels ({levels}) must not exceed n ({n})")
