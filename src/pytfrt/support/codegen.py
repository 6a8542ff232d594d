"""Generated Python code: one builder (indentation, constant pool) and one way to run it.

pytfrt turns programs into Python source in several places (whole-function and sync BEF
functions, kernel call shims, ``CompiledModel``'s call path, ``@pytfrt.function``'s fast path,
the CPU backend's fused and graph kernels).  They all run it through :func:`exec_generated`,
which compiles the text under a unique ``<...>`` file name and registers that text with
:mod:`linecache`: a traceback through generated code then shows the generated line, and
``inspect.getsource``, ``pdb`` and profilers find it, as for a file on disk.

:class:`CodeBuilder` is the optional builder: lines at an indentation depth and a constant pool
(values the code refers to by generated names, put into the namespace it runs in).

Large texts (:data:`CACHE_MIN_CHARS` or more: whole-function code) keep their byte code in the
owner-only directory of :mod:`pytfrt.support.disk_cache`, as ``.pyc`` files keep a module's: a
later process that generates the same text under the same file name loads the code object
(``marshal``) instead of compiling it again.  A cache file holds the text and the file name
beside the code, and is used only if both are equal to this call's (so a hash collision or a
damaged file only costs a compile); its name carries the interpreter's cache tag.

The registered texts stay in :mod:`linecache` for the life of the process (they are small, and
every site caches what it generates, so each text is generated once); ``linecache.checkcache``
keeps them, as it keeps every entry that has no file behind it.

Thread-safety: :func:`exec_generated` may be called from any thread (the name counter is
locked); a :class:`CodeBuilder` belongs to one thread.
"""

from __future__ import annotations

import itertools
import linecache
import marshal
import os
import sys
import threading
import zlib
from collections.abc import Iterable
from types import CodeType
from typing import Any

__all__ = ["CodeBuilder", "exec_generated"]

_lock = threading.Lock()
_serial = itertools.count(1)


def _free_name(label: str, lines: list[str]) -> str:
    """``<label>``, or ``<label #n>`` if ``<label>`` holds another text (call under the lock)."""
    name = f"<{label}>"
    entry = linecache.cache.get(name)
    while entry is not None and entry[2:3] != (lines,):  # (a lazy entry has 1 item)
        name = f"<{label} #{next(_serial)}>"
        entry = linecache.cache.get(name)
    return name


def exec_generated(source: str, label: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """Compile ``source`` under a file name made from ``label`` (``<label>``, or ``<label #n>``
    if that name holds another text), register the text with :mod:`linecache`, run it in
    ``namespace`` and return that namespace.

    Raises:
        SyntaxError, RecursionError, MemoryError: ``source`` does not compile (nothing is
            registered or run then); whatever running its top level raises.
    """
    lines = source.splitlines(keepends=True)
    with _lock:
        filename = _free_name(label, lines)
        code = _compiled(source, filename)
        linecache.cache[filename] = (len(source), None, lines, filename)
    exec(code, namespace)  # noqa: S102 - the one place generated code runs
    return namespace


CACHE_MIN_CHARS = 4096
"""Generated texts of at least this many characters keep their byte code on disk."""


def _compiled(source: str, filename: str) -> CodeType:
    """``compile(source, filename, "exec")``, through the on-disk code cache for large texts."""
    if len(source) < CACHE_MIN_CHARS:
        return compile(source, filename, "exec")
    from pytfrt.support.disk_cache import cache_dir

    d = cache_dir()
    if d is None:
        return compile(source, filename, "exec")
    key = f"{zlib.crc32(source.encode()):08x}{zlib.crc32(filename.encode()):08x}{len(source):x}"
    path = d / f"code_{sys.implementation.cache_tag}_{key}.marshal"
    try:
        stored = marshal.loads(path.read_bytes())
        if (isinstance(stored, tuple) and len(stored) == 3 and stored[0] == source
                and stored[1] == filename and isinstance(stored[2], CodeType)):
            return stored[2]
    except (OSError, ValueError, EOFError, TypeError):
        pass
    code = compile(source, filename, "exec")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        tmp.write_bytes(marshal.dumps((source, filename, code)))
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
    return code


class CodeBuilder:
    """Lines of generated source at indentation depths, and a pool of constants.

    ``const(value)`` returns a fresh name bound to ``value`` in :attr:`namespace`; the code
    refers to it by that name.  :meth:`build` runs the source (:func:`exec_generated`) in the
    namespace and returns it.
    """

    def __init__(self, namespace: dict[str, Any] | None = None, indent: str = "    ") -> None:
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = {} if namespace is None else namespace
        self.indent = indent
        self._consts = 0

    def line(self, depth: int, text: str) -> None:
        """Append ``text`` at indentation ``depth``."""
        self.lines.append(self.indent * depth + text)

    def block(self, depth: int, texts: Iterable[str]) -> None:
        """Append each of ``texts`` at ``depth``."""
        for text in texts:
            self.line(depth, text)

    def const(self, value: Any, prefix: str = "_c") -> str:
        """A new name bound to ``value`` in the namespace."""
        self._consts += 1
        name = f"{prefix}{self._consts}"
        self.namespace[name] = value
        return name

    def source(self) -> str:
        """The text so far (one trailing newline)."""
        return "\n".join(self.lines) + "\n"

    def build(self, label: str) -> dict[str, Any]:
        """Run the source in the namespace (:func:`exec_generated`); the namespace."""
        return exec_generated(self.source(), label, self.namespace)
