"""BEF: the plain Program model and the Binary Executable Format (writer, reader, disassembler).

Depends only on :mod:`pytfrt.support`; never imports xDSL or the host runtime.
"""

from pytfrt.bef.program import Function as Function
from pytfrt.bef.program import Kernel as Kernel
from pytfrt.bef.program import Program as Program
from pytfrt.bef.program import ProgramError as ProgramError

__all__ = ["Function", "Kernel", "Program", "ProgramError"]
