"""Compiled fast paths for the JSON that is slow in Python: a float tensor in, float32 out.

An image request (ResNet-50: 150,528 numbers, 3 MB of JSON) spends longer in ``json.loads``
and ``np.asarray`` than a fast model spends computing.  :func:`parse_float32_tensor` reads the
body ``{"instances": <nested list>}`` or ``{"inputs": <nested list>}`` in one compiled
pass -- structure, rectangular shape and numbers -- and returns exactly the float32 array the
general path (``json.loads``, then float64, then float32) would have produced, or ``None``
whenever it cannot promise that, so the caller takes the general path (which also produces
the error message for a malformed body).  ``None`` is returned for: any other body shape, a
token that is not a plain decimal number (``NaN``, ``Infinity``, strings, ``true``, objects),
more than 18 significant digits or a decimal exponent beyond +-66, ragged or malformed lists,
and -- checked per element, in the scan -- a value whose float32 rounding is not settled: the
float64 ``v`` computed for a number must round to the same float32 as ``v - t`` and ``v + t``
with ``t = 1.2e-15 * |v|`` (over five float64 ulps), and that float32 must be finite.  Why that
suffices: ``v`` is computed with at most four roundings (the mantissa, then products or
quotients by exact powers of ten up to 1e22), so it is within two ulps of the decimal, whose
correctly rounded double (the general path's) is then within 2.5 ulps of ``v``, inside
``[v - t, v + t]``; rounding to float32 is monotonic, so it rounds to the same float32.  The
scan writes the float32 values directly.  Pure function; thread-safe; the kernel releases the
GIL.

Two kernels implement the scan with one contract (:func:`_scan_impl`'s): the C extension
``pytfrt.serving._json_scan`` (``_json_scan.c``; built by ``setup.py`` when a C compiler is
there; 2.5 ms against 4.8 ms for one pass over the ResNet-50 body) and, when it is not built,
the Numba-compiled :func:`_scan_impl` (:data:`KERNEL_ENV` chooses).  The C kernel settles the
float32 rounding the same way, finds the structural characters 64 bytes at a time and reads a
number whose end is thus known in 16-byte blocks, and instead of refusing a fraction or
exponent number that it cannot settle (or one with over 19 significant digits or a long
exponent) converts that number exactly as ``json.loads`` does (CPython's correctly rounded
conversion, the GIL taken back for it); integers it cannot settle are refused as here.

The server does not wait for a big body to arrive whole: :class:`BodyScan` scans its pieces
while the rest arrives, and joins them as below.  A whole body of :data:`SPLIT_BYTES` or more
given to :func:`parse_float32_tensor` is scanned in pieces (up to :data:`MAX_PIECES`, cut
right after commas) in parallel, on the calling thread and the CPU kernels' thread pool
(:func:`pytfrt.host.parallel.parallel_for`) -- while that pays: when the pool's thread
does not get a core (a busy machine), splitting pauses (:data:`SPLIT_MIN_SPEEDUP`).  A piece
after the first starts right after a comma at a depth it does not know, so its scan works
with *relative* levels: level 0 is the comma's list, negative levels are lists opened before
the piece.  Each piece validates
its own grammar and learns what dimensions it can; :func:`_merge` then folds the pieces in
order and checks that they fit -- each piece closes only lists that are open, the items of a
list split across pieces add up to its dimension, the rank, the numbers' depth and every
dimension agree, the last piece closes the tensor and only ``}`` follows -- else the body is
scanned again in one pass, so splitting can change the speed, never the result.

The response side: :func:`dumps_float32` writes a float32 output array as the bytes
``json.dumps(array.tolist(), separators=(",", ":"))`` gives, in C (``_json_scan.c``: each
number's ``repr`` -- the shortest decimal that reads back as its double -- found with 128-bit
integers; the cases that method does not cover go to CPython's own ``repr``), ~4x faster for
the 1,000 floats of a ResNet-50 answer (0.1 ms against 0.39 ms).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Final

import numpy as np

from pytfrt import config

MIN_BYTES: Final = 1024
"""Smaller bodies take the general path.  Measured (thread CPU time per decode, one process):
the two break even near 300 bytes (16 numbers); at 1.3 KB (64 numbers) the scan took 10 us
against 18 us, for the MLP's 16 KB (784 numbers) 34 us against 153 us."""
SPLIT_BYTES: Final = config.integer("PYTFRT_JSON_SPLIT_BYTES") or 256 * 1024
"""Bodies this large are scanned in pieces in parallel (handing a piece to the pool costs
~50 us; scanning 128 KB ~0.25 ms).  The environment variable ``PYTFRT_JSON_SPLIT_BYTES``
(read at import) overrides it, e.g. a huge value to A/B the one-pass scan
(``benchmarks/serve_ab.py`` takes ``NAME=VALUE`` environment settings in a variant)."""
SPLIT_MIN_SPEEDUP: Final = 1.25
SPLIT_PAUSE_SECONDS: Final = 1.0
"""A split whose pieces took less than ``SPLIT_MIN_SPEEDUP`` times its wall time in CPU time
(the pool's thread did not run beside this one: the machine has no idle core) pauses
splitting for ``SPLIT_PAUSE_SECONDS``; then a split is tried again.  Measured on the 2-core
machine under a load average of 12 (other jobs): pieces in parallel 16.1 ms median against
13.5 ms for one pass -- a thread holding the GIL between two pieces is descheduled and the
other waits -- so a busy machine parses in one pass, with one probe a second."""
_split_paused_until = 0.0
PIECE_BYTES: Final = 128 * 1024
MAX_PIECES: Final = 8
"""A split body is cut into ``min(MAX_PIECES, size // PIECE_BYTES)`` pieces: several, so that
the work still divides when one thread is slow to start or is preempted."""
MAX_RANK: Final = 32

_PREFIX: Final = re.compile(rb'[ \t\n\r]*\{[ \t\n\r]*"(instances|inputs)"[ \t\n\r]*:[ \t\n\r]*')
"""JSON's whitespace is exactly these four bytes (``\\s`` and ``bytes.strip`` also take
``\\x0b``/``\\x0c``, which ``json.loads`` refuses)."""
JSON_SPACE: Final = b" \t\n\r"
_POW10: Final = np.array([10.0**k for k in range(23)])
_LEVELS: Final = 2 * MAX_RANK + 1
"""Per-level arrays are indexed by ``level + MAX_RANK`` (relative levels go down to -MAX_RANK)."""
_NONE: Final = -1000  # "not seen yet" for a level

_kernel: Any = None
_unavailable = False


def _scan_impl(buf: Any, start: int, stop: int, suffix: bool, pow10: Any,
               dims: Any, counts: Any, partial: Any, inherited: Any, out: Any
               ) -> tuple[int, int, int, int, int, int, int, int]:
    """Scan ``buf[start:stop]``: (status, rank, number_depth, depth, min_depth, min_pos, count,
    end).

    status 0 = done, 1 = not handled (malformed), 2 = refused, 3 = reached ``stop`` inside the
    tensor (the first piece of a split).  ``suffix=False``: ``start`` is the outermost ``[``;
    the scan ends when it closes.  ``suffix=True``: ``start`` follows a comma of the tensor;
    levels are relative (see the module docstring); the scan ends at ``}`` or ``stop``;
    ``partial[level]`` gets the items this piece added to each list opened before it that it
    closes, ``inherited[level]`` tells at the end whether the list open at that level was
    opened before the piece, and ``min_pos`` is the position right after the ``]`` that first
    reached ``min_depth``, the lowest level.  ``dims[level]`` (-1 = unknown) gets the items of
    every list wholly inside the scan, ``counts[level]`` the items of the lists open at the end,
    ``out`` the values.  Levels index the arrays at ``level + MAX_RANK``; ``rank`` and
    ``number_depth`` are ``_NONE`` if unseen.
    """
    top = MAX_RANK
    n = buf.shape[0]
    zero = np.float32(0.0)
    inf32 = np.float32(np.inf)
    depth = 0
    rank = _NONE
    number_depth = _NONE
    count = 0
    min_depth = 0
    min_pos = start
    expect = np.zeros(2 * MAX_RANK + 1, np.bool_)
    inherited[:] = False
    if suffix:
        for k in range(top + 1):
            inherited[k] = True  # levels <= 0: lists opened before ``start``
        expect[top] = True  # right after a comma
    i = start
    while i < stop:
        c = buf[i]
        if c == 32 or c == 10 or c == 13 or c == 9:
            i += 1
            continue
        if c == 91:  # '['
            if number_depth != _NONE and depth >= number_depth:
                return 1, 0, 0, 0, 0, 0, 0, i  # a list beside numbers
            if suffix or depth > 0:
                if not expect[depth + top]:
                    return 1, 0, 0, 0, 0, 0, 0, i
                expect[depth + top] = False
                counts[depth + top] += 1
            depth += 1
            if depth > top:
                return 1, 0, 0, 0, 0, 0, 0, i
            counts[depth + top] = 0
            expect[depth + top] = True
            inherited[depth + top] = False
            i += 1
            continue
        if c == 93:  # ']'
            if depth <= (-top + 1 if suffix else 0):
                return 1, 0, 0, 0, 0, 0, 0, i
            k = depth + top
            items = counts[k]
            if expect[k] and (items > 0 or inherited[k]):  # trailing comma
                return 1, 0, 0, 0, 0, 0, 0, i
            if rank == _NONE:
                rank = depth  # the first list to close is the deepest
            if depth > rank:
                return 1, 0, 0, 0, 0, 0, 0, i
            if inherited[k]:
                partial[k] = items
                inherited[k] = False
            elif dims[k] == -1:
                dims[k] = items
            elif dims[k] != items:
                return 1, 0, 0, 0, 0, 0, 0, i  # ragged
            depth -= 1
            i += 1
            if depth < min_depth:
                min_depth = depth
                min_pos = i
            if depth == 0 and not suffix:
                return 0, rank, number_depth, depth, min_depth, min_pos, count, i
            continue
        if c == 44:  # ','
            k = depth + top
            if (depth == 0 and not suffix) or expect[k] or (counts[k] == 0 and not inherited[k]):
                return 1, 0, 0, 0, 0, 0, 0, i
            expect[k] = True
            i += 1
            continue
        if c == 125 and suffix:  # '}': the end of the body
            return 0, rank, number_depth, depth, min_depth, min_pos, count, i
        # A number: -?digits[.digits][(e|E)[+-]digits]
        k = depth + top
        if (depth == 0 and not suffix) or not expect[k]:
            return 1, 0, 0, 0, 0, 0, 0, i
        if rank != _NONE and depth != rank:
            return 1, 0, 0, 0, 0, 0, 0, i  # a number beside lists
        if number_depth == _NONE:
            number_depth = depth
        elif depth != number_depth:
            return 1, 0, 0, 0, 0, 0, 0, i
        negative = False
        if i < n and buf[i] == 45:  # '-'
            negative = True
            i += 1
        if i + 1 < n and buf[i] == 48 and 48 <= buf[i + 1] <= 57:
            return 1, 0, 0, 0, 0, 0, 0, i  # a leading zero: not JSON
        # The digits accumulate without checks (leading zeros add nothing; a mantissa of
        # over 18 digits may wrap, but is refused below, from the digit counts).
        int_start = i
        mantissa = 0
        while i < n:
            d = buf[i] - 48
            if d < 0 or d > 9:
                break
            mantissa = mantissa * 10 + d
            i += 1
        int_end = i
        if int_end == int_start:
            return 1, 0, 0, 0, 0, 0, 0, i
        frac_start = i
        integer = True  # no fraction, no exponent: json.loads makes it an int ("-0" is 0)
        if i < n and buf[i] == 46:  # '.'
            integer = False
            i += 1
            frac_start = i
            while i < n:
                d = buf[i] - 48
                if d < 0 or d > 9:
                    break
                mantissa = mantissa * 10 + d
                i += 1
            if i == frac_start:
                return 1, 0, 0, 0, 0, 0, 0, i
        scale = frac_start - i
        digits = (int_end - int_start) - scale
        if digits > 18:
            # Leading zeros do not count.
            first = int_start
            while first < int_end and buf[first] == 48:
                first += 1
            if first == int_end:
                first = frac_start
                while first < i and buf[first] == 48:
                    first += 1
                digits = i - first
            else:
                digits = (int_end - first) - scale
            if digits > 18:
                return 2, 0, 0, 0, 0, 0, 0, i
        if i < n and (buf[i] == 101 or buf[i] == 69):  # 'e' 'E'
            integer = False
            i += 1
            esign = 1
            if i < n and (buf[i] == 43 or buf[i] == 45):
                if buf[i] == 45:
                    esign = -1
                i += 1
            exponent = 0
            edigits = 0
            while i < n and 48 <= buf[i] <= 57:
                exponent = exponent * 10 + (buf[i] - 48)
                edigits += 1
                if edigits > 4:
                    return 2, 0, 0, 0, 0, 0, 0, i
                i += 1
            if edigits == 0:
                return 1, 0, 0, 0, 0, 0, 0, i
            scale += esign * exponent
        if mantissa == 0:
            single = zero
            if integer:
                negative = False  # the int -0 is 0; the floats -0.0 and -0e0 keep their sign
        elif scale > 66 or scale < -66:
            return 2, 0, 0, 0, 0, 0, 0, i
        else:
            # Powers of ten up to 1e22 are exact doubles: at most 4 roundings in all.
            value = float(mantissa)
            left = scale if scale >= 0 else -scale
            while left > 0:
                step = left if left <= 22 else 22
                if scale >= 0:
                    value = value * pow10[step]
                else:
                    value = value / pow10[step]
                left -= step
            single = np.float32(value)
            slack = value * 1.2e-15
            if single == inf32 or np.float32(value - slack) != single or \
                    np.float32(value + slack) != single:
                return 2, 0, 0, 0, 0, 0, 0, i  # the float32 rounding is not settled (or overflows)
        result = -single if negative else single
        if count >= out.shape[0]:
            return 2, 0, 0, 0, 0, 0, 0, i
        out[count] = result
        count += 1
        counts[k] += 1
        expect[k] = False
    if suffix:
        return 0, rank, number_depth, depth, min_depth, min_pos, count, i
    return 3 if stop < buf.shape[0] else 1, rank, number_depth, depth, min_depth, min_pos, count, i


def _compile() -> Any:
    import numba

    return numba.njit(nogil=True, cache=True)(_scan_impl)


KERNEL_ENV: Final = "PYTFRT_JSON_SCAN"
"""``c`` or ``numba``: which kernel :func:`_scan` uses (read when it first runs).  By default the
C kernel (``pytfrt.serving._json_scan``, built by ``setup.py`` when a C compiler is there), else
the Numba one; ``numba`` forces Numba and turns :func:`dumps_float32` off (the server as
without the extension), for A/B runs."""


def c_kernel() -> Any:
    """The C kernel (the contract of :func:`_scan_impl`, see ``_json_scan.c``), or ``None`` when
    the optional extension is not built."""
    try:
        from pytfrt.serving import _json_scan
    except ImportError:
        return None
    return _json_scan.scan


def kernel_name() -> str:
    """``"c"``, ``"numba"`` or ``"none"``: the kernel :func:`_scan` uses."""
    scan = _scan()
    return "none" if scan is None else "c" if scan is c_kernel() else "numba"


def _threads() -> int:
    """Threads a split scan may use (the process's thread budget, the caller included)."""
    from pytfrt.host.parallel import num_threads

    return num_threads()


def _scan() -> Any:
    """The scan kernel (C, else Numba: :data:`KERNEL_ENV`), or ``None`` if neither is there (the
    general path is used)."""
    global _kernel, _unavailable
    if _kernel is None and not _unavailable:
        if config.choice(KERNEL_ENV) != "numba":
            _kernel = c_kernel()
        if _kernel is None:
            try:
                _kernel = _compile()
            except Exception:  # noqa: BLE001 - an optimisation must never break a request
                _unavailable = True
    return _kernel


def warm_up() -> None:
    """Compile the kernel now (a tiny body, whole and split), so the first big request does
    not pay for it, and start the helper threads :class:`BodyScan` uses."""
    global _split_paused_until
    body = b'{"instances": [[1.5, 2.0], [3.0, 4.0]]}' + b" " * MIN_BYTES
    parse_float32_tensor(body)
    parse_float32_tensor(body, split_at=[25])
    _split_paused_until = 0.0  # a split this small shows no speedup: not a reason to pause
    if _streaming:
        from pytfrt.host.parallel import start_helpers

        start_helpers()


def _arrays(size: int) -> tuple[Any, Any, Any, Any, Any]:
    """Fresh ``dims``, ``counts``, ``partial``, ``inherited`` and ``out`` arrays for a scan."""
    return (np.full(_LEVELS, -1, np.int64), np.zeros(_LEVELS, np.int64),
            np.zeros(_LEVELS, np.int64), np.zeros(_LEVELS, np.bool_),
            np.empty(size, np.float32))


def _whole(scan: Any, buf: Any, start: int) -> tuple[np.ndarray, int] | None:
    """One pass: (values, end) or ``None``."""
    arrays = _arrays(buf.shape[0] // 2 + 1)  # a number and its comma: >= 2 bytes
    status, rank, _, _, _, _, count, end = scan(buf, start, buf.shape[0], False, _POW10,
                                                *arrays)
    if status != 0:
        return None
    shape = tuple(int(d) for d in arrays[0][MAX_RANK + 1:MAX_RANK + 1 + rank])
    if int(np.prod(shape)) != count:
        return None
    # A view, not a copy: the unused tail of ``out`` was never written, so (for a big body,
    # allocated with mmap) it holds no memory.
    return arrays[4][:count].reshape(shape), end


Piece = tuple[tuple[int, ...], tuple[Any, ...]]
"""A piece's scan result and its arrays (see :func:`_scan_impl`)."""


def _cuts(body: bytes, start: int, pieces: int, at: Sequence[int] | None) -> list[int]:
    """Piece boundaries: ``start``, positions right after a comma, ``len(body)``."""
    n = len(body)
    targets = sorted(at) if at is not None else [start + (n - start) * k // pieces
                                                 for k in range(1, pieces)]
    cuts = [start]
    for target in targets:
        comma = body.find(b",", max(target, cuts[-1]))
        if comma < 0:
            break
        if comma + 1 > cuts[-1]:
            cuts.append(comma + 1)
    cuts.append(n)
    return cuts


def _split(scan: Any, body: bytes, buf: Any, cuts: list[int]) -> tuple[np.ndarray, int] | None:
    """Scan the pieces between ``cuts`` in parallel (see the module docstring): (values, end),
    or ``None`` if they do not fit together (then the caller scans in one pass).

    The pieces are shards of :func:`pytfrt.host.parallel.parallel_for`, the threads the CPU
    kernels use: this thread claims pieces too and never waits for a helper that has not
    started, so on a busy machine the split costs at most one piece's wait over one pass.
    """
    from pytfrt.host.parallel import parallel_for

    pieces: list[Piece | None] = [None] * (len(cuts) - 1)
    work = [0.0] * len(pieces)

    def run(index: int) -> None:
        cpu = time.thread_time()
        begin, stop = cuts[index], cuts[index + 1]
        arrays = _arrays((stop - begin) // 2 + 1)
        pieces[index] = (scan(buf, begin, stop, index > 0, _POW10, *arrays), arrays)
        work[index] = time.thread_time() - cpu

    began = time.perf_counter()
    parallel_for(run, len(pieces))
    _note_speedup(sum(work), time.perf_counter() - began)
    return _merge(body, cuts, [p for p in pieces if p is not None])


def _note_speedup(work: float, wall: float) -> None:
    """After a split that took ``wall`` seconds for ``work`` seconds of scanning (CPU time):
    if that is under :data:`SPLIT_MIN_SPEEDUP`, pause splitting for
    :data:`SPLIT_PAUSE_SECONDS`.  Thread-safe (one float; a lost update is harmless)."""
    global _split_paused_until
    if wall > 0 and work / wall < SPLIT_MIN_SPEEDUP:
        _split_paused_until = time.monotonic() + SPLIT_PAUSE_SECONDS


def splitting() -> bool:
    """Whether big bodies are split now (not paused by :func:`_note_speedup`)."""
    return time.monotonic() >= _split_paused_until


def _merge(body: bytes | bytearray, cuts: list[int], pieces: list[Piece]
           ) -> tuple[np.ndarray, int] | None:
    """Join the pieces' scans (see the module docstring), or ``None`` if they do not fit."""
    top = MAX_RANK
    (status, rank, numbers, depth, _, _, total, _), (dims0, counts0, _, _, out0) = pieces[0]
    if status != 3 or depth < 1 or len(pieces) != len(cuts) - 1:
        return None
    dims = {level: int(dims0[level + top]) for level in range(1, top + 1)
            if dims0[level + top] != -1}
    counts = {level: int(counts0[level + top]) for level in range(1, depth + 1)}
    end = 0
    for index, (result, arrays) in enumerate(pieces[1:], start=1):
        status, rank_k, numbers_k, final, lowest, min_pos, count, end = result
        dims_k, counts_k, partial_k, inherited_k, _ = arrays
        last = index == len(pieces) - 1
        if status != 0 or (not last and end != cuts[index + 1]):
            return None
        if depth + lowest < (0 if last else 1):
            return None  # closed more lists than were open, or the tensor before its end
        for mine, theirs in ((rank_k, rank), (numbers_k, numbers)):
            if mine != _NONE and theirs != _NONE and mine + depth != theirs:
                return None
        rank = rank if rank != _NONE or rank_k == _NONE else rank_k + depth
        numbers = numbers if numbers != _NONE or numbers_k == _NONE else numbers_k + depth
        sizes = [(level + depth, int(dims_k[level + top])) for level in range(-top, top + 1)
                 if dims_k[level + top] != -1]
        # The lists open before the piece that it closed: their items add up.
        sizes += [(level + depth, counts[level + depth] + int(partial_k[level + top]))
                  for level in range(lowest + 1, 1)]
        for level, size in sizes:
            if not 1 <= level <= top or dims.setdefault(level, size) != size:
                return None
        for level in range(lowest, final + 1):  # the lists open at the piece's end
            if level + depth >= 1:
                mine = int(counts_k[level + top])
                counts[level + depth] = (counts.get(level + depth, 0) + mine
                                         if inherited_k[level + top] else mine)
        depth += final
        total += count
        if last and (depth != 0 or lowest != final or body[min_pos:end].strip(JSON_SPACE)):
            return None  # the tensor must close at the end of the last piece, then only "}"
    if rank == _NONE or rank > top or numbers not in (rank, _NONE):
        return None
    shape = [dims.get(level, -1) for level in range(1, rank + 1)]
    if -1 in shape or len(dims) != rank or int(np.prod(shape)) != total:
        return None
    values = np.empty(total, np.float32)
    offset = 0
    for result, arrays in pieces:
        count = result[6]
        values[offset:offset + count] = arrays[4][:count]
        offset += count
    return values.reshape(shape), end


STREAM_PIECE_BYTES: Final = 256 * 1024
"""A body read by a :class:`BodyScan` is cut into pieces of about this size as it arrives
(uvicorn hands a big body over in messages of ~256 KB; joining 13 pieces took 0.09 ms)."""
STREAM_ENV: Final = "PYTFRT_JSON_STREAM"
"""``0`` turns :class:`BodyScan` off (read at import; for A/B runs)."""
_streaming = config.flag(STREAM_ENV)


def _submit(fn: Callable[..., Piece], *args: Any) -> Future[Piece]:
    """Scan a piece of an arriving body on a helper thread of the process's parallel runtime
    (:func:`pytfrt.host.parallel.submit`: the threads, and the thread budget, of the CPU
    kernels)."""
    from pytfrt.host.parallel import submit

    return submit(fn, *args)


class BodyScan:
    """A request body scanned in pieces while it arrives: the receive of a big body overlaps
    its parsing.

    :meth:`feed` copies each chunk into a buffer of the body's size; whenever
    :data:`STREAM_PIECE_BYTES` more have arrived, the bytes up to the last comma become a piece,
    scanned by a helper thread of the parallel runtime (the scan releases the GIL) while later
    chunks arrive.  :meth:`result` scans the last piece (and any piece no helper has started)
    on the calling thread, waits for the others and joins them as :func:`parse_float32_tensor`
    joins its pieces (:func:`_merge`; if they do not fit, the whole body is scanned again in
    one pass), so it returns what ``parse_float32_tensor(body)`` returns.  A body that does not
    start as a float tensor body is only collected.

    Thread-safety: :meth:`feed` and :meth:`body` from one thread (the event loop's); then
    :meth:`result` once, from any thread.
    """

    def __init__(self, size: int, scan: Any) -> None:
        self.size = size
        self._buf = bytearray(size)
        self._view = memoryview(self._buf)
        self._array = np.frombuffer(self._buf, np.uint8)  # what both kernels take
        self._filled = 0
        self._scan = scan
        self._key: str | None = None
        self._cuts: list[int] = []
        self._futures: list[Future[Piece]] = []
        self._collect_only = False

    @classmethod
    def start(cls, size: int) -> BodyScan | None:
        """A scan for a body of ``size`` bytes (its Content-Length), or ``None`` when it is too
        small to pay (under :data:`SPLIT_BYTES`), or streaming or the kernels are off."""
        if not _streaming or size < SPLIT_BYTES:
            return None
        scan = _scan()
        return None if scan is None else cls(size, scan)

    def feed(self, chunk: bytes) -> None:
        """Add the next chunk of the body.  Raises ``ValueError`` past ``size`` bytes."""
        end = self._filled + len(chunk)
        if end > self.size:
            raise ValueError("the body is longer than its Content-Length")
        self._view[self._filled:end] = chunk
        self._filled = end
        if self._collect_only:
            return
        if not self._cuts:
            if end < min(64, self.size):
                return  # wait for the whole prefix
            match = _PREFIX.match(self._buf, 0, end)
            start = -1 if match is None else match.end()
            if match is None or start >= end or self._buf[start] != ord("["):
                self._collect_only = True
                return
            self._key = match.group(1).decode("ascii")
            self._cuts = [start]
        begin = self._cuts[-1]
        if end - begin >= STREAM_PIECE_BYTES and end < self.size:
            comma = self._buf.rfind(b",", begin, end)
            if comma > begin:
                index = len(self._futures)
                self._cuts.append(comma + 1)
                self._futures.append(_submit(self._piece, index, begin, comma + 1))

    def body(self) -> bytearray:
        """The bytes received so far (all of the body after the last :meth:`feed`)."""
        return self._buf if self._filled == self.size else self._buf[:self._filled]

    def _piece(self, index: int, begin: int, stop: int) -> Piece:
        arrays = _arrays((stop - begin) // 2 + 1)
        return self._scan(self._array, begin, stop, index > 0, _POW10, *arrays), arrays

    def result(self) -> tuple[str, np.ndarray] | None:
        """What ``parse_float32_tensor(body)`` gives for the whole body (call after the last
        :meth:`feed`)."""
        complete = not self._collect_only and self._cuts and self._filled == self.size
        cuts = [*self._cuts, self.size]
        done: dict[int, Piece] = {}
        try:
            if complete and self._futures:  # the last piece, here and first
                done[len(self._futures)] = self._piece(len(self._futures), cuts[-2], cuts[-1])
            # Then, from the back, the pieces no pool thread has started (never wait for a
            # thread that has no core); then wait for the others.
            for index in reversed(range(len(self._futures))):
                if self._futures[index].cancel():
                    if complete:
                        done[index] = self._piece(index, cuts[index], cuts[index + 1])
            for index, future in enumerate(self._futures):
                if index not in done and not future.cancelled():
                    done[index] = future.result()
        except Exception:  # noqa: BLE001 - e.g. a Numba compile error: use the general path
            return None
        if not complete:
            return None
        body = self._buf
        try:
            parsed = None
            if self._futures:
                pieces = [done[index] for index in range(len(cuts) - 1)]
                parsed = _merge(body, cuts, pieces)
            if parsed is None:
                parsed = _whole(self._scan, self._array, self._cuts[0])
        except Exception:  # noqa: BLE001 - as in parse_float32_tensor
            return None
        if parsed is None or self._key is None:
            return None
        array, end = parsed
        if body[end:].strip(JSON_SPACE) != b"}":
            return None
        return self._key, array


def parse_float32_tensor(body: bytes, *, split_at: Sequence[int] | None = None
                         ) -> tuple[str, np.ndarray] | None:
    """``(key, array)`` for a ``{"instances"|"inputs": <numbers>}`` body, else ``None``.

    ``array`` is float32 and equal, element for element, to what ``json.loads`` + float64 +
    float32 gives; ``None`` means "take the general path" (see the module docstring).
    By default a body of :data:`SPLIT_BYTES` or more is scanned in pieces in parallel (when
    the CPU kernels' pool has more than one thread); ``split_at`` (for tests) forces a split
    with a cut at the first comma from each of these offsets, whatever the body's size.
    Thread-safe.
    """
    if len(body) < MIN_BYTES:
        return None
    match = _PREFIX.match(body)
    if match is None:
        return None
    buf = np.frombuffer(body, dtype=np.uint8)
    start = match.end()
    if start >= len(body) or body[start] != ord("["):
        return None
    scan = _scan()
    if scan is None:
        return None
    try:
        parsed = None
        if split_at is not None or len(body) >= SPLIT_BYTES and _threads() > 1 and splitting():
            cuts = _cuts(body, start, min(MAX_PIECES, len(body) // PIECE_BYTES), split_at)
            if len(cuts) > 2:
                parsed = _split(scan, body, buf, cuts)
        if parsed is None:
            parsed = _whole(scan, buf, start)
    except Exception:  # noqa: BLE001 - e.g. a Numba compile error: use the general path
        return None
    if parsed is None:
        return None
    array, end = parsed
    if body[end:].strip(JSON_SPACE) != b"}":
        return None
    return match.group(1).decode("ascii"), array


def dumps_float32(array: np.ndarray) -> bytes | None:
    """``json.dumps(array.tolist(), separators=(",", ":")).encode()`` for a non-empty float32
    array of rank 1 to :data:`MAX_RANK`, byte for byte, or ``None`` (another array, or the C
    extension is not built: the caller takes ``json.dumps``).  Thread-safe."""
    if (array.dtype != np.float32 or array.ndim < 1 or array.ndim > MAX_RANK
            or array.size == 0):
        return None
    if _dumps is None:
        return None
    return bytes(_dumps(np.ascontiguousarray(array)))


def _c_dumps() -> Any:
    """The C ``dumps_float32``, or ``None`` (not built, or :data:`KERNEL_ENV` is ``numba``)."""
    if config.choice(KERNEL_ENV) == "numba":
        return None
    try:
        from pytfrt.serving import _json_scan
    except ImportError:
        return None
    return _json_scan.dumps_float32


_dumps = _c_dumps()
