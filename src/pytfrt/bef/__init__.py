"""BEF: the plain Program model and the Binary Executable Format (writer, reader, disassembler).

Depends only on :mod:`pytfrt.support`; never imports xDSL or the host runtime.

Public API:

* :func:`write_bef` (Program -> bytes) and :func:`read_bef` (bytes -> Program, validating
  every byte; malformed input raises :class:`BefError`);
* :func:`program_to_mlir` (the disassembler behind ``tfrt_translate --bef-to-mlir``) and
  :func:`describe_bef` (a section dump for debugging);
* stream analysis: :func:`assign_stream_ids`, :func:`analyze_streams` (see
  :mod:`pytfrt.bef.streams`);
* BEF-only attribute values :class:`SymbolRefAttr` and :class:`RawAttr`.

The format is documented in ``docs/bef.md``.
"""

from pytfrt.bef.attr_codec import RawAttr as RawAttr
from pytfrt.bef.attr_codec import SymbolRefAttr as SymbolRefAttr
from pytfrt.bef.disasm import describe_bef as describe_bef
from pytfrt.bef.disasm import program_to_mlir as program_to_mlir
from pytfrt.bef.format import BefError as BefError
from pytfrt.bef.format import BefWriteError as BefWriteError
from pytfrt.bef.program import Function as Function
from pytfrt.bef.program import Kernel as Kernel
from pytfrt.bef.program import Program as Program
from pytfrt.bef.program import ProgramError as ProgramError
from pytfrt.bef.reader import first_use_location as first_use_location
from pytfrt.bef.reader import read_bef as read_bef
from pytfrt.bef.streams import analyze_streams as analyze_streams
from pytfrt.bef.streams import assign_stream_ids as assign_stream_ids
from pytfrt.bef.writer import write_bef as write_bef

__all__ = [
    "BefError",
    "BefWriteError",
    "Function",
    "Kernel",
    "Program",
    "ProgramError",
    "RawAttr",
    "SymbolRefAttr",
    "analyze_streams",
    "assign_stream_ids",
    "describe_bef",
    "first_use_location",
    "program_to_mlir",
    "read_bef",
    "write_bef",
]
