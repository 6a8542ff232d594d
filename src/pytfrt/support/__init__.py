"""Support layer: errors, source locations and configuration shared by every other layer.

Depends on the standard library only.
"""

from pytfrt.support.errors import ErrorCode as ErrorCode
from pytfrt.support.errors import PytfrtError as PytfrtError
from pytfrt.support.errors import Status as Status
from pytfrt.support.location import UNKNOWN_LOC as UNKNOWN_LOC
from pytfrt.support.location import CallSiteLoc as CallSiteLoc
from pytfrt.support.location import FileLineColLoc as FileLineColLoc
from pytfrt.support.location import FusedLoc as FusedLoc
from pytfrt.support.location import Location as Location
from pytfrt.support.location import NameLoc as NameLoc
from pytfrt.support.location import UnknownLoc as UnknownLoc

__all__ = [
    "CallSiteLoc",
    "ErrorCode",
    "FileLineColLoc",
    "FusedLoc",
    "Location",
    "NameLoc",
    "PytfrtError",
    "Status",
    "UNKNOWN_LOC",
    "UnknownLoc",
]
