"""The ``bef_executor`` tool: run every function of a BEF (or MLIR) file (docs/conformance.md).

Usage::

    bef_executor [options] [<input: .bef | .mlir | - (stdin, the default)>]

Options (LLVM style: one or two dashes, ``--flag=value`` or ``--flag value``):
``--functions=f,g``, ``--test_init_function=name``, ``--work_queue_type=s|mstd[:N[,M]]``,
``--host_allocator_type=malloc|test_fixed_size_1k|profiled_allocator|leak_check_allocator``,
``--print_error_code``, ``--kernels=<module or file.py>`` (repeatable), ``--shared_libs=a,b``
(Python kernel modules/files, like ``--kernels``), ``--enable_tracing``, ``--tracing_level=
default|verbose|debug``, ``--trace_file=out.json`` (Chrome/Perfetto trace-event JSON),
``--data_dir=<dir>`` (repeatable: the directories kernels may read files from; by default the
working directory and the program's own directory, see docs/security.md),
``--timeout_seconds=S`` (a deadline per function: results still pending after S seconds become
``Deadline exceeded`` errors, each unfinished kernel is reported at its location and the exit
status is 1).  Without a timeout, a run whose results can no longer be produced by any thread
(a stuck kernel on ``s``, a kernel helper thread that died) is reported the same way as a
deadlock instead of hanging.

``--kernels`` and ``--shared_libs`` run the named Python code with your privileges, like any
plugin: load only code you trust.  The program itself cannot reach files outside the data
directories.

Run sequence (docs/conformance.md): print the allocator and work-queue ``Choosing ...`` lines, load
the program (kernels resolved before anything runs), run the init function, then each function with
``--- Running 'f':`` and a ``'f' returned ...`` line, each with a fresh ResourceContext and
RequestContext; results are awaited, printed, then the queue is quiesced.

Diagnostics go through an ``expected-error`` verifier (docs/conformance.md): each runtime diagnostic
is ``runtime error: <message>`` at its location; matching annotations in the source file consume
it silently, others are printed to stderr and make the exit status 1; unmatched expectations
of every file a diagnostic pointed into are reported at exit.

Heavy modules (the MLIR front end, NumPy-based kernel libraries) are imported only when the
input or its kernels need them, so a small ``.bef`` starts quickly.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytfrt.support import tfrt_revision

if TYPE_CHECKING:
    from pytfrt.bef.program import Program
    from pytfrt.host import AsyncValue, Diagnostic, HostContext
    from pytfrt.support.errors import ErrorCode

PROG = "bef_executor"
BEF_MAGIC = b"\x0b\xef"


class UsageError(Exception):
    """A command-line or input problem: one message, exit status 1."""


class HelpRequested(Exception):
    """``--help`` or ``--list_kernels``: print the message to stdout, exit status 0."""


HELP = f"""OVERVIEW: run the functions of a BEF file (or of MLIR compiled on the fly)

USAGE: {PROG} [options] [<input .bef | .mlir | - (stdin, the default)>]

OPTIONS (one or two dashes; --flag=value or --flag value):
  --functions=<f,g>             run only these functions, in this order
  --test_init_function=<name>   run this function first (if it exists)
  --work_queue_type=<s|mstd[:N[,M]]>
                                single-threaded (default) or N threads + M blocking threads
  --host_allocator_type=<malloc|test_fixed_size_1k|profiled_allocator|leak_check_allocator>
  --print_error_code            add ', code: <CODE>' to printed errors
  --kernels=<module|file.py>    load kernels from Python code (repeatable; runs that code)
  --shared_libs=<a,b>           the same, TFRT's spelling
  --devices=<cpu,null,...>      register these op handlers by name (TFRT's 2020 flag)
  --enable_tracing              print TFRT's text trace
  --tracing_level=<default|verbose|debug>
  --trace_file=<out.json>       write a Chrome/Perfetto trace
  --data_dir=<dir>              a directory kernels may read files from (repeatable)
  --timeout_seconds=<S>         a deadline per function
  --list_kernels                print the name of every registered kernel and exit
  --help                        print this help and exit
"""


@dataclass
class Options:
    """Parsed command line (see the module docstring)."""

    input: str = "-"
    functions: list[str] | None = None
    test_init_function: str = ""
    work_queue_type: str = "s"
    host_allocator_type: str = "leak_check_allocator"
    print_error_code: bool = False
    kernels: list[str] = field(default_factory=list)
    shared_libs: list[str] = field(default_factory=list)
    enable_tracing: bool = False
    tracing_level: str = "default"
    trace_file: str = ""
    data_dirs: list[str] = field(default_factory=list)
    timeout_seconds: float | None = None
    devices: list[str] = field(default_factory=list)
    list_kernels: bool = False


_VALUE_FLAGS = {
    "functions", "test_init_function", "work_queue_type", "host_allocator_type", "kernels",
    "shared_libs", "tracing_level", "trace_file", "data_dir", "timeout_seconds", "devices",
}
_BOOL_FLAGS = {"print_error_code", "enable_tracing", "list_kernels"}


def parse_args(argv: Sequence[str]) -> Options:
    """Parse LLVM-style options. Raises :class:`UsageError` with a one-line message."""
    opts = Options()
    positional: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "-" or not arg.startswith("-"):
            positional.append(arg)
            continue
        if arg in ("-h", "--help", "-help"):
            raise HelpRequested(HELP)
        name, eq, value = arg.lstrip("-").partition("=")
        name = name.replace("-", "_")
        if name in _BOOL_FLAGS:
            if eq and value.lower() not in ("true", "false", "1", "0"):
                raise UsageError(f"{PROG}: invalid boolean value '{value}' for option '{arg}'")
            setattr(opts, name, not eq or value.lower() in ("true", "1"))
            continue
        if name not in _VALUE_FLAGS:
            raise UsageError(f"{PROG}: Unknown command line argument '{arg}'.  "
                             f"Try: '{PROG} --help'")
        if not eq:
            if i >= len(argv):
                raise UsageError(f"{PROG}: option '{arg}' requires a value")
            value = argv[i]
            i += 1
        if name == "functions":
            opts.functions = [f for f in value.split(",") if f]
        elif name == "kernels":
            opts.kernels.append(value)
        elif name == "timeout_seconds":
            try:
                seconds = float(value)
            except ValueError:
                seconds = -1.0
            if not 0 < seconds < float("inf"):
                raise UsageError(f"{PROG}: --timeout_seconds needs a positive number of "
                                 f"seconds, got '{value}'")
            opts.timeout_seconds = seconds
        elif name == "data_dir":
            if not os.path.isdir(value):
                raise UsageError(f"{PROG}: --data_dir '{value}' is not a directory")
            opts.data_dirs.append(value)
        elif name == "shared_libs":
            opts.shared_libs.extend(v for v in value.split(",") if v)
        elif name == "devices":
            opts.devices.extend(v for v in value.split(",") if v)
        else:
            setattr(opts, name, value)
    if len(positional) > 1:
        raise UsageError(f"{PROG}: too many positional arguments: {' '.join(positional)}")
    if positional:
        opts.input = positional[0]
    return opts


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _err(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


# -- input --------------------------------------------------------------------------------------


def read_program(path: str, timeout_seconds: float | None = None) -> Program:
    """Read a ``.bef`` file, or compile a ``.mlir`` file; ``-`` reads stdin (sniffing the magic).

    ``timeout_seconds`` bounds decoding or compiling (not reading the bytes or importing the
    front end): see :func:`_within`.

    Raises:
        UsageError: unreadable file or invalid BEF/MLIR (the message says why), or the
            deadline passed.
    """
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
            name = "<stdin>"
        else:
            with open(path, "rb") as fh:
                data = fh.read()
            name = path
    except OSError as exc:
        raise UsageError(f"{PROG}: could not open input file '{path}': "
                         f"{exc.strerror or exc}") from exc
    if data[:2] == BEF_MAGIC or (path.endswith(".bef") and data):
        from pytfrt.bef.format import BefError
        from pytfrt.bef.reader import read_bef

        try:
            return _within(timeout_seconds, name, lambda: read_bef(data))
        except BefError as exc:
            raise UsageError(f"{PROG}: {name}: {exc}") from exc
    if not data:
        raise UsageError(f"{PROG}: {name}: the input is empty")
    return _compile_mlir(data, name, timeout_seconds)


class _Expired(BaseException):
    """Raised by the SIGPROF handler of :func:`_within` (a BaseException, so no ``except
    Exception`` in a parser swallows it)."""


def _within(seconds: float | None, name: str, read: Callable[[], Any]) -> Any:
    """``read()``, ended with a :class:`UsageError` after ``seconds`` of CPU time
    (``--timeout_seconds`` covers decoding and compiling the program too; CPU time, so a busy
    machine does not fail a parse that would finish).  Uses ``ITIMER_PROF``, so only on the
    main thread of a POSIX process; elsewhere ``read()`` runs unbounded."""
    import signal
    import threading

    if (seconds is None or not hasattr(signal, "setitimer")
            or threading.current_thread() is not threading.main_thread()):
        return read()

    def expire(_signum: int, _frame: Any) -> None:
        raise _Expired

    previous = signal.signal(signal.SIGPROF, expire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        return read()
    except _Expired:
        raise UsageError(f"{PROG}: {name}: reading the program did not finish before the "
                         f"deadline (--timeout_seconds={seconds:g})") from None
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def _compile_mlir(data: bytes, name: str, timeout_seconds: float | None = None) -> Program:
    try:
        mlir = importlib.import_module("pytfrt.mlir")
    except ImportError as exc:
        raise UsageError(f"{PROG}: {name} is not a BEF file and the MLIR front end is not "
                         f"available ({exc})") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{PROG}: {name} is neither a BEF file nor UTF-8 MLIR text") from exc
    try:
        if timeout_seconds is not None:  # the front end's imports are not the program's cost
            mlir.compile_mlir("func.func @f() {\n  tfrt.return\n}\n", "<warm-up>")
        program: Program = _within(timeout_seconds, name,
                                   lambda: mlir.compile_mlir(text, name))
    except mlir.MlirError as exc:
        raise UsageError(str(exc).rstrip("\n")) from exc
    if not program.streams_assigned:
        from pytfrt.bef.streams import assign_stream_ids

        assign_stream_ids(program)
    return program


# -- printing results ---------------------------------------------------------------------------


def error_code_name(code: ErrorCode) -> str:
    """``code`` as TFRT's driver prints it: absl's name (``INTERNAL``, ``INVALID_ARGUMENT``;
    TFRT's main branch), or with ``PYTFRT_TFRT_REVISION=de22adc4`` the ``ErrorCode`` enumerator
    names of that revision's ``include/tfrt/support/error_type.def`` (``Unknown``,
    ``InvalidArgument``, ...), i.e. the canonical name in CamelCase."""
    if tfrt_revision.is_main():
        return code.display_name
    return "".join(part.capitalize() for part in code.name.split("_"))


def format_result(value: AsyncValue[Any], type_name: str, print_error_code: bool) -> str:
    """One result as the driver prints it (docs/conformance.md)."""
    if value.is_unavailable():  # only after a deadline or deadlock that could not be forced
        return "<<error: not available>>"
    if value.is_error():
        status = value.error
        if print_error_code:
            return f"<<error: {status.message}, code: {error_code_name(status.code)}>>"
        return f"<<error: {status.message}>>"
    payload = value.get()
    if type_name == "i1":
        return "1" if payload else "0"
    if type_name in ("i32", "i64"):
        return str(int(payload))
    if type_name in ("f32", "f64"):
        return f"{float(payload):e}"
    return f"{type_name} value"



class RuntimeDiagnostics:
    """The HostContext diagnostic handler: ``runtime error: <msg>`` through the verifier.

    A diagnostic identical to an earlier unexpected one (same location and message: endless
    recursion reports the same kernel thousands of times) is not printed again; :meth:`finish`
    prints one ``note`` with the number of repeats.  Names quoted in messages are cut to
    :data:`MAX_QUOTED_NAME` characters (as the MLIR parser does).  Thread-safe.
    """

    def __init__(self, verifier: Any) -> None:
        import threading

        self.verifier = verifier
        self.repeats: dict[tuple[str | None, int, int, str], int] = {}
        self._lock = threading.Lock()

    def __call__(self, diag: Diagnostic) -> None:
        flc = diag.location.file_line_col()
        message = f"runtime error: {shorten_names(diag.message)}"
        if flc is None:
            key = (f"loc({diag.location.opaque()})", 0, 0, message)
        else:
            key = (flc[0], flc[1], flc[2], message)
        with self._lock:
            if key in self.repeats:
                self.repeats[key] += 1
                self.verifier.failed = True
                return
        if not self.verifier.handle(key[0], key[1], key[2], "error", message):
            with self._lock:
                self.repeats.setdefault(key, 0)

    def finish(self) -> None:
        """Print how often each repeated diagnostic was repeated."""
        with self._lock:
            for (file, line, col, _), n in self.repeats.items():
                if n:
                    where = f"{file}:{line}:{col}" if line else str(file)
                    _err(f"{where}: note: the error above was repeated {n} more "
                         f"time{'s' if n > 1 else ''}")
            self.repeats.clear()


MAX_QUOTED_NAME = 80
"""Names quoted in run-time messages are cut to this many characters (as in parse errors)."""


def shorten_names(message: str) -> str:
    """``message`` with every single-quoted name longer than :data:`MAX_QUOTED_NAME`
    characters cut, and its length given."""
    if len(message) <= MAX_QUOTED_NAME:
        return message
    import re

    def cut(m: re.Match[str]) -> str:
        name = m.group(1)
        if len(name) <= MAX_QUOTED_NAME:
            return m.group(0)
        return f"'{name[:MAX_QUOTED_NAME]}...' ({len(name)} characters)"

    return re.sub(r"'([^'\n]*)'", cut, message)


# -- the run ------------------------------------------------------------------------------------


class Driver:
    """One ``bef_executor`` run: host, verifier and the function loop."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        from pytfrt.support.diagnostic_verifier import DiagnosticVerifier

        self.verifier = DiagnosticVerifier(sys.stderr)
        self.diagnostics = RuntimeDiagnostics(self.verifier)
        self.host: HostContext | None = None
        self.allocator: Any = None
        self.stuck = False  # a kernel never finished (deadline or deadlock)

    def setup(self) -> None:
        """Allocator, work queue and host (prints the two ``Choosing`` lines)."""
        from pytfrt.host import numpy_free
        from pytfrt.host.allocator import create_allocator
        from pytfrt.host.file_access import DataDirectories
        from pytfrt.host.host_context import HostContext
        from pytfrt.host.kernel_libraries import load_kernels
        from pytfrt.host.registry import RegistryError
        from pytfrt.host.work_queue import create_work_queue
        from pytfrt.kernel_libraries import builtin_registry

        try:
            self.allocator = create_allocator(self.opts.host_allocator_type)
        except ValueError as exc:
            raise UsageError(f"{PROG}: {exc}") from exc
        _out(self.allocator.choosing_line)
        try:
            queue = create_work_queue(self.opts.work_queue_type)
        except ValueError as exc:
            raise UsageError(
                f"{PROG}: couldn't create work queue type {self.opts.work_queue_type}: {exc}"
            ) from exc
        _out(f"Choosing {queue.name} work queue.")
        queue.on_task_error = _report_task_error
        registry = builtin_registry(numpy_free=numpy_free.ENABLED)
        for spec in self.opts.kernels:
            try:
                load_kernels(registry, spec)
            except RegistryError as exc:
                queue.shutdown()
                raise UsageError(f"{PROG}: {exc}") from exc
        for spec in self.opts.shared_libs:
            try:
                load_kernels(registry, spec)
            except RegistryError as exc:
                queue.shutdown()
                raise UsageError(f"{PROG}: couldn't load library {exc}") from exc
        data_dirs = (DataDirectories(self.opts.data_dirs) if self.opts.data_dirs
                     else DataDirectories.default(self.opts.input))
        self.host = HostContext(
            queue, registry, self.diagnostics, self.allocator,
            data_dirs,
        )
        self.host.tracer = _make_tracer(self.opts)  # type: ignore[attr-defined]
        if self.opts.devices:
            _register_devices(self.host, self.opts.devices)

    def run(self, program: Program) -> None:
        """Load ``program`` and run its functions (docs/conformance.md)."""
        from pytfrt.executor import LoadError, load_program

        host = self.host
        assert host is not None
        function_list = self._function_list(program)
        try:
            bef = load_program(program, host)
        except LoadError:
            return
        tracer = getattr(host, "tracer", None)
        if tracer is not None:
            tracer.begin_scope("Bef Executor", 0)
        init = self.opts.test_init_function
        if init and bef.get_function(init) is not None:
            self._run_one(bef.get_function(init))
        for index in function_list:
            fn = bef.functions[index]
            if init and fn.name == init:
                continue
            if fn.num_arguments:
                _out(f"--- Not running '{fn.name}' because it has arguments.")
                continue
            self._run_one(fn)
        if tracer is not None:
            tracer.end_scope()

    def _function_list(self, program: Program) -> list[int]:
        if self.opts.functions is None:
            return list(range(len(program.functions)))
        indices = []
        for name in self.opts.functions:
            try:
                indices.append(program.function_index(name))
            except KeyError:
                raise UsageError(f"{PROG}: couldn't find function {name}") from None
        return indices

    def _run_one(self, fn: Any) -> None:
        from pytfrt.host.execution_context import ExecutionContext, ResourceContext
        from pytfrt.host.function import FunctionKind
        from pytfrt.host.registry import KernelError

        host = self.host
        assert host is not None
        _out(f"--- Running '{fn.name}':")
        resources = ResourceContext()
        ctx = ExecutionContext(host.new_request(resources))
        tracer = getattr(host, "tracer", None)
        if tracer is not None:
            tracer.begin_scope(f"Function: {fn.name}", 0)
        code = self.opts.print_error_code
        if fn.kind is FunctionKind.SYNC:
            try:
                values = fn.execute_sync(ctx, [])
            except KernelError as exc:
                _out(f"'{fn.name}' returned <<error: {exc}>>")
            else:
                if values:
                    from pytfrt.host.async_value import make_available

                    shown = [format_result(make_available(v), t, code)
                             for v, t in zip(values, fn.result_types, strict=True)]
                    _out(f"'{fn.name}' returned {','.join(shown)}")
        else:
            request = ctx.request_context
            if self.opts.timeout_seconds is not None:
                request.set_deadline(self.opts.timeout_seconds)
            results = fn.execute(ctx, [])
            self._await(results, request)
            if results:
                shown = [format_result(r, t, code)
                         for r, t in zip(results, fn.result_types, strict=True)]
                _out(f"'{fn.name}' returned {','.join(shown)}")
            if not host.quiesce(1.0 if self.stuck else None):
                _err(f"{PROG}: tasks of '{fn.name}' are still running; not waiting for them")
            for r in results:
                r.drop_ref()
        if tracer is not None:
            tracer.end_scope()
        resources.destroy()

    def _await(self, results: list[AsyncValue[Any]], request: Any) -> None:
        """Await ``results``; on a deadline or a deadlock report the kernels that never finished.

        Both cancel the request, which abandons every in-flight kernel result (each becomes
        the cancel error), so the results are available afterwards.
        """
        from pytfrt.host.diagnostics import Diagnostic
        from pytfrt.host.work_queue import WorkQueueError
        from pytfrt.support.errors import ErrorCode, Status

        host = self.host
        assert host is not None
        deadlock = False
        try:
            host.await_values(results)
        except WorkQueueError:
            deadlock = True
            request.cancel(Status("Deadlock: no thread can produce the results",
                                  ErrorCode.INTERNAL))
            host.await_values(results, 1.0)
        request.close()
        # A program may cancel its own request (tfrt_test.cancel): kernels abandoned by that
        # are not failures of the run.
        unfinished = request.unfinished() if deadlock or request.deadline_exceeded() else []
        if not unfinished:
            return
        self.stuck = True
        if request.deadline_exceeded():
            why = ("did not finish before the deadline "
                   f"(--timeout_seconds={self.opts.timeout_seconds:g})")
        else:
            why = "never finished: no thread can produce its results (deadlock)"
        for name, location in unfinished:
            host.emit_error(Diagnostic(f"kernel '{name}' {why}", location))

    def finish(self) -> int:
        """Stop the queue, report unmatched expectations and the allocator; the exit status."""
        self.diagnostics.finish()
        status = 0 if self.verifier.finish() and not self.stuck else 1
        if self.host is not None:
            self.host.shutdown(1.0 if self.stuck else None)
            tracer = getattr(self.host, "tracer", None)
            if tracer is not None and hasattr(tracer, "flush"):
                tracer.flush()
        if self.allocator is not None:
            if self.allocator.report_at_exit(sys.stdout):
                status = 1
        return status


def _report_task_error(exc: BaseException) -> None:
    """A task raised outside any kernel's error handling: one line, no traceback."""
    _err(f"{PROG}: a task raised {type(exc).__name__}: {exc}")


def _make_tracer(opts: Options) -> Any:
    """The tracing sink for ``--enable_tracing``, or ``None`` (the tracing module is optional)."""
    if not opts.enable_tracing and not opts.trace_file:
        return None
    try:
        tracing = importlib.import_module("pytfrt.tracing")
    except ImportError:
        return None
    try:
        return tracing.create_tracer(opts.tracing_level, opts.trace_file or None,
                                     text=opts.enable_tracing, process_name=PROG)
    except (ValueError, OSError) as exc:
        raise UsageError(f"{PROG}: {exc}") from exc


def _list_kernels(opts: Options) -> int:
    """Print every kernel name (built-in libraries and ``--kernels``), one a line."""
    from pytfrt.host.kernel_libraries import load_kernels
    from pytfrt.host.registry import RegistryError
    from pytfrt.kernel_libraries import builtin_registry

    registry = builtin_registry()
    for spec in [*opts.kernels, *opts.shared_libs]:
        try:
            load_kernels(registry, spec)
        except RegistryError as exc:
            _err(f"{PROG}: {exc}")
            return 1
    for name in registry.kernel_names():
        _out(name)
    return 0


def _register_devices(host: Any, devices: Sequence[str]) -> None:
    """``--devices=cpu,null``: register op handlers under those names (TFRT's 2020 driver)."""
    from pytfrt.core_runtime.core_runtime import CoreRuntime
    from pytfrt.core_runtime.op_handler import NullOpHandler

    runtime = CoreRuntime.of(host)
    for device in devices:
        if device == "null":
            runtime.register_op_handler("null", NullOpHandler())
        elif device == "cpu":
            runtime.register_op_handler("cpu", runtime.create_cpu_op_handler(NullOpHandler()))
        else:
            raise UsageError(f"{PROG}: unknown device '{device}' (known: cpu, null)")


def numpy_free_program(opts: Options, program: Program) -> bool:
    """Whether to run ``program`` NumPy-free (:mod:`pytfrt.host.numpy_free`): it has tensor
    kernels and every one of them is in the NumPy-free library
    (:data:`pytfrt.kernel_libraries.NUMPY_FREE_LIBRARY`; the ``tfrt.*`` basic kernels need no
    NumPy for their usual types), no extra kernels are loaded (``--kernels``,
    ``--shared_libs``), ``PYTFRT_NUMPY_FREE`` is on, and NumPy is not imported already (a
    process that has it, e.g. ``main`` called in-process, runs as ever).  A program of basic
    kernels only has no tensors and needs nothing of this."""
    from pytfrt import config

    names = [n for n in program.kernel_names() if not n.startswith("tfrt.")]
    if not names or opts.kernels or opts.shared_libs or "numpy" in sys.modules \
            or not config.flag("PYTFRT_NUMPY_FREE"):
        return False
    import importlib

    from pytfrt.kernel_libraries import NUMPY_FREE_LIBRARY

    library = importlib.import_module(NUMPY_FREE_LIBRARY)
    return all(n in library.KERNEL_NAMES for n in names)


def main(argv: list[str] | None = None) -> int:
    """Run the tool; returns the process exit status."""
    args = sys.argv[1:] if argv is None else argv
    try:
        opts = parse_args(args)
    except HelpRequested as exc:
        _out(str(exc).rstrip("\n"))
        return 0
    except UsageError as exc:
        _err(str(exc))
        return 1
    if opts.list_kernels:
        return _list_kernels(opts)
    driver = Driver(opts)
    try:
        if opts.input != "-" and not os.path.exists(opts.input):
            raise UsageError(f"{PROG}: could not open input file '{opts.input}': "
                             "No such file or directory")
        program = read_program(opts.input, opts.timeout_seconds)
        if numpy_free_program(opts, program):
            from pytfrt.host import numpy_free

            numpy_free.enable()
        driver.setup()
        driver.run(program)
    except UsageError as exc:
        _err(str(exc))
        if driver.host is not None:
            driver.host.shutdown()
        return 1
    return driver.finish()


if __name__ == "__main__":
    sys.exit(main())
