"""Error values and exception types shared by all layers.

A :class:`Status` is the payload of an error AsyncValue (TFRT's ``absl::Status``): a canonical
:class:`ErrorCode` and a message.  It is a plain immutable value, safe to share between threads.
Error messages follow the house rules: specific, lower-case start, no trailing period.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ErrorCode(enum.IntEnum):
    """Canonical error codes (the subset of absl's codes TFRT uses)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16

    @property
    def display_name(self) -> str:
        """The name TFRT prints for ``--print_error_code`` (e.g. ``INTERNAL``)."""
        return self.name


@dataclass(frozen=True, slots=True)
class Status:
    """An error: canonical code plus message (``absl::Status`` without the OK case).

    Errors made from a plain message (TFRT's ``MakeStringError``) are ``INTERNAL``;
    cancellation is ``CANCELLED`` with message ``Cancelled``.
    """

    message: str
    code: ErrorCode = ErrorCode.INTERNAL

    def __str__(self) -> str:
        return self.message


CANCELLED_STATUS = Status("Cancelled", ErrorCode.CANCELLED)


class PytfrtError(Exception):
    """Base class of every exception pytfrt raises on purpose."""
