"""Decoding and checking one function record of the Functions section (docs/bef.md).

Used by :mod:`pytfrt.bef.reader`; split out because it is the hot path of loading (one fixed32
kernel record per op).  Record layout::

    VBR location, VBR num_registers, VBR use_count*, VBR num_kernels,
    (VBR record_offset, VBR ready_count, VBR stream_id)*, VBR result_register*,
    0xCC padding to 4, kernel records (fixed32, contiguous, the pseudo kernel first)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytfrt.bef.cursor import Cursor
from pytfrt.bef.format import PADDING_BYTE, PSEUDO_KERNEL_CODE, PSEUDO_KERNEL_LOCATION, SectionId
from pytfrt.support.function_kind import FunctionKind
from pytfrt.support.location import Location

if TYPE_CHECKING:
    from pytfrt.bef.reader import _Reader

_HEADER = struct.Struct("<6I")


@dataclass
class RawKernel:
    """A decoded kernel record (kernel indices in ``used_by`` are 0-based, pseudo excluded)."""

    name: str
    operands: list[int]
    results: list[int]
    attribute_offsets: list[int]
    functions: list[int]
    location: Location
    stream_id: int
    used_by: list[list[int]]
    record_start: int
    num_regions: int | None = None


@dataclass
class FunctionRecord:
    """A decoded function record."""

    start: int
    location: Location
    num_registers: int
    use_counts: list[int]
    return_registers: list[int]
    root_stream_id: int
    pseudo_used_by: list[list[int]] = field(default_factory=list)
    kernels: list[RawKernel] = field(default_factory=list)


def read_function_record(
    reader: _Reader,
    entry: tuple[FunctionKind, str, list[str], list[str], int],
    num_functions: int,
) -> FunctionRecord:
    """Decode the record of FunctionIndex ``entry``; raise BefError on any inconsistency."""
    _, name, args, results, offset = entry
    fbase, fend = reader.sections[SectionId.FUNCTIONS]
    data = reader.data
    c = Cursor(data, fbase + offset, fend, "Functions")
    start = c.pos
    loc_at = c.pos
    location = reader.locations.get(c.vbr(), "Functions", loc_at)
    nregs = c.count("register")
    use_counts = [c.vbr() for _ in range(nregs)]
    nkernels = c.count("kernel", 3)
    if nkernels < 1:
        raise c.fail(f"function '{name}' has no pseudo kernel")
    table = [(c.vbr(), c.vbr(), c.vbr()) for _ in range(nkernels)]
    if len(results) > c.end - c.pos:
        raise c.fail("result registers overrun the section")
    returns = [c.index(nregs, "result register") for _ in results]
    while (c.pos - fbase) % 4:
        if c.byte() != PADDING_BYTE:
            raise c.fail("bad padding before the kernel list", c.pos - 1)
    list_start = c.pos
    record = FunctionRecord(start, location, nregs, use_counts, returns, table[0][2])

    expected = 0
    nargs = len(args)
    nnames = len(reader.kernel_names)
    typed = reader.typed_attrs
    attr_size = reader.attr_decoder.end - reader.attr_decoder.base
    for k, (rec_offset, ready, stream) in enumerate(table):
        pos = list_start + rec_offset
        if rec_offset != expected:
            raise c.fail(f"kernel {k} record offset {rec_offset} is not contiguous", list_start)
        if pos + 24 > fend:
            raise c.fail(f"kernel {k} record overruns the section", pos)
        code, loc, n_args, n_attrs, n_funcs, n_results = _HEADER.unpack_from(data, pos)
        head_words = 6 + n_results
        if pos + 4 * head_words > fend:
            raise c.fail(f"kernel {k} record overruns the section", pos)
        counts = struct.unpack_from(f"<{n_results}I", data, pos + 24)
        body = n_args + n_attrs + n_funcs + n_results + sum(counts)
        if pos + 4 * (head_words + body) > fend:
            raise c.fail(f"kernel {k} record overruns the section", pos)
        words = struct.unpack_from(f"<{body}I", data, pos + 4 * head_words)
        expected = rec_offset + 4 * (head_words + body)
        if ready != n_args:
            raise c.fail(f"kernel {k} ready count {ready} != its {n_args} operands", pos)
        i = n_args + n_attrs + n_funcs
        operands = list(words[:n_args])
        attr_offsets = list(words[n_args : n_args + n_attrs])
        functions = list(words[n_args + n_attrs : i])
        result_regs = list(words[i : i + n_results])
        used_by = []
        j = i + n_results
        for n in counts:
            users = words[j : j + n]
            j += n
            for u in users:
                if not 0 < u < nkernels:
                    raise c.fail(f"kernel {k} used-by index {u} out of range", pos)
            used_by.append([u - 1 for u in users])
        if k == 0:
            pseudo_ok = (code, loc, n_args, n_attrs, n_funcs) == (
                PSEUDO_KERNEL_CODE,
                PSEUDO_KERNEL_LOCATION,
                0,
                0,
                0,
            )
            if not pseudo_ok or result_regs != [nregs, *range(nargs)]:
                raise c.fail("malformed pseudo kernel record", pos)
            record.pseudo_used_by = used_by
            continue
        if code >= nnames:
            raise c.fail(f"kernel {k} code {code} out of range", pos)
        for r in operands:
            if r >= nregs:
                raise c.fail(f"kernel {k} operand register {r} out of range", pos)
        for r in result_regs:
            if r >= nregs:
                raise c.fail(f"kernel {k} result register {r} out of range", pos)
        for f in functions:
            if f >= num_functions:
                raise c.fail(f"kernel {k} function index {f} out of range", pos)
        for a in attr_offsets:
            if (typed is not None and a not in typed) or a >= attr_size:
                raise c.fail(f"kernel {k} attribute offset {a} is not an attribute", pos)
        record.kernels.append(
            RawKernel(
                reader.kernel_names[code],
                operands,
                result_regs,
                attr_offsets,
                functions,
                reader.locations.get(loc, "Functions", pos + 4),
                stream,
                used_by,
                pos,
            )
        )
    if nregs != nargs + sum(len(k.results) for k in record.kernels):
        raise c.fail(f"function '{name}' register count {nregs} != arguments + results", start)
    return record
