"""Serving errors: a canonical error code plus a message, and the HTTP status for each code.

Every failure the server reports to a client is a :class:`ServingError` carrying one of the
canonical codes of :class:`pytfrt.support.errors.ErrorCode`; the REST layer turns it into
``{"error": "<message>"}`` with the HTTP status TensorFlow Serving's HTTP server uses for that
code (:data:`HTTP_STATUS`).  Messages follow the house rules (specific, lower-case start, no
trailing period), except the few kept verbatim from TensorFlow Serving because clients match
them (``Servable not found for request: Latest(name)``).
"""

from __future__ import annotations

from typing import Final

from pytfrt.support.errors import ErrorCode, Status

# TensorFlow Serving's mapping from canonical codes to HTTP statuses (its http_server.cc).
HTTP_STATUS: Final[dict[ErrorCode, int]] = {
    ErrorCode.OK: 200,
    ErrorCode.CANCELLED: 499,
    ErrorCode.UNKNOWN: 500,
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.DEADLINE_EXCEEDED: 504,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.ALREADY_EXISTS: 409,
    ErrorCode.PERMISSION_DENIED: 403,
    ErrorCode.RESOURCE_EXHAUSTED: 429,
    ErrorCode.FAILED_PRECONDITION: 400,
    ErrorCode.ABORTED: 409,
    ErrorCode.OUT_OF_RANGE: 400,
    ErrorCode.UNIMPLEMENTED: 501,
    ErrorCode.INTERNAL: 500,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.DATA_LOSS: 500,
    ErrorCode.UNAUTHENTICATED: 401,
}


class ServingError(Exception):
    """A request failure with a canonical code; ``str(err)`` is the client-facing message."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INVALID_ARGUMENT) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    @property
    def http_status(self) -> int:
        """The HTTP status for this error's code."""
        return HTTP_STATUS.get(self.code, 500)

    def to_status(self) -> Status:
        """This error as a runtime :class:`Status` (the payload of an error AsyncValue)."""
        return Status(self.message, self.code)

    @classmethod
    def from_status(cls, status: Status) -> ServingError:
        """The error an error AsyncValue carries, as a :class:`ServingError`."""
        return cls(status.message, status.code)


def invalid(message: str) -> ServingError:
    """An ``INVALID_ARGUMENT`` error (HTTP 400)."""
    return ServingError(message, ErrorCode.INVALID_ARGUMENT)


def not_found(message: str) -> ServingError:
    """A ``NOT_FOUND`` error (HTTP 404)."""
    return ServingError(message, ErrorCode.NOT_FOUND)


class ListenError(OSError):
    """A port that cannot be bound (the message names the address)."""
