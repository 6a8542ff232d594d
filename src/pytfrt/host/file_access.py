"""Which files kernels may read: the data directories of a HostContext (see docs/security.md).

A program (MLIR or BEF) must not reach the filesystem on its own: a kernel that reads a file
named by the program (``btf.read_dense_tensor.*``) asks :class:`DataDirectories` to open it.
The policy:

* the path, made absolute against the working directory and with every symbolic link
  resolved, must lie under one of the directories the user named (``bef_executor
  --data_dir``; by default the working directory and the program's own directory);
* it must be a regular file (not a device such as ``/dev/zero``, not a FIFO, not a directory);
  this is checked with ``stat`` before opening and again on the open descriptor, and the open
  never blocks (``O_NONBLOCK``) nor follows a link swapped in meanwhile (``O_NOFOLLOW``);
* readers get the size first and read only byte ranges they have validated against it
  (:meth:`RegularFile.read`), so a file can never make them allocate more than it holds;
* error messages name the path and the reason, never the file's contents.

Thread-safe: a :class:`DataDirectories` is immutable; each :class:`RegularFile` is used by one
reader.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from typing import Final

from pytfrt.support.errors import PytfrtError

_OPEN_FLAGS: Final = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)


class FileAccessError(PytfrtError):
    """A kernel may not read the file, or the file cannot be read (the message says why)."""


class RegularFile:
    """An open regular file of known size; read byte ranges with :meth:`read`."""

    def __init__(self, path: str, fd: int, size: int) -> None:
        self.path = path
        self.size = size
        self._fd = fd

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset``; raises :class:`FileAccessError` past the end."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise FileAccessError(f"file {self.path} is truncated")
        data = os.pread(self._fd, length, offset)
        if len(data) != length:  # the file shrank while we read it
            raise FileAccessError(f"file {self.path} is truncated")
        return data

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> RegularFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DataDirectories:
    """The directories under which kernels may read files (see the module docstring).

    Args:
        roots: directories (relative ones are taken against the working directory now).
            An empty list allows no file at all.
    """

    def __init__(self, roots: Iterable[str | os.PathLike[str]]) -> None:
        self.roots: tuple[str, ...] = tuple(
            dict.fromkeys(os.path.realpath(os.fspath(r)) for r in roots)
        )

    @classmethod
    def default(cls, program_path: str | None = None) -> DataDirectories:
        """The working directory, plus the directory of ``program_path`` if given."""
        roots = [os.getcwd()]
        if program_path and program_path != "-":
            roots.append(os.path.dirname(os.path.abspath(program_path)))
        return cls(roots)

    def allows(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` (links resolved) lies under one of the roots."""
        real = os.path.realpath(os.fspath(path))
        return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep)
                   for root in self.roots)

    def open(self, path: str | os.PathLike[str], what: str) -> RegularFile:
        """Open ``path`` for reading under the policy.

        ``what`` starts every error message (e.g. ``failed to open file p for reading``).

        Raises:
            FileAccessError: outside the roots, not a regular file, or not openable.
        """
        shown = os.fspath(path)
        if not self.allows(path):
            raise FileAccessError(
                f"{what}: the file is not under a data directory (allow its directory with "
                "bef_executor --data_dir)"
            )
        real = os.path.realpath(shown)
        try:
            info = os.stat(real)
        except OSError:
            raise FileAccessError(what) from None
        if not stat.S_ISREG(info.st_mode):
            raise FileAccessError(f"{what}: not a regular file")
        try:
            fd = os.open(real, _OPEN_FLAGS)
        except OSError:
            raise FileAccessError(what) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise FileAccessError(f"{what}: not a regular file")
        except BaseException:
            os.close(fd)
            raise
        return RegularFile(shown, fd, info.st_size)


UNRESTRICTED: Final = DataDirectories([os.sep])
"""Every regular file (for trusted Python callers; kernels use their host's directories)."""
