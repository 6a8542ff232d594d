"""``code_size_test_driver``: TFRT's minimal BEF driver, used by ``code_size_test_app``.

Usage::

    cat fib.bef | code_size_test_driver

Reads a BEF file from stdin and runs every function with the integer and control-flow kernels
only (plus ``tfrt.new.chain`` / ``tfrt.merge.chains``), on the single-threaded work queue with
the plain malloc allocator, no diagnostic verifier and no ResourceContext. It prints the same
``--- Not running …``, ``--- Running …`` and ``'f' returned …`` lines as ``bef_executor``, but
no ``Choosing …`` lines; it awaits the results but does not quiesce. If the BEF cannot be opened
it prints ``Could not BEFFile::Open fib.bef.`` and exits 1 (TFRT aborts).
"""

from __future__ import annotations

import sys


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    """Run the driver on stdin; returns the exit status."""
    from pytfrt.bef.format import BefError
    from pytfrt.bef.reader import read_bef
    from pytfrt.host.allocator import create_allocator
    from pytfrt.host.execution_context import ExecutionContext
    from pytfrt.host.host_context import HostContext
    from pytfrt.host.registry import KernelRegistry
    from pytfrt.kernels.basic import chain, control_flow, integer
    from pytfrt.tools.bef_executor import format_result

    data = sys.stdin.buffer.read()
    try:
        program = read_bef(data)
        from pytfrt.executor import LoadError, load_program
    except (BefError, ValueError):
        _out("Could not BEFFile::Open fib.bef.")
        return 1
    registry = KernelRegistry()
    for module in (integer, control_flow, chain):
        registry.add_module(module)
    host = HostContext("s", registry, lambda diag: None, create_allocator("malloc"))
    try:
        try:
            bef = load_program(program, host)
        except LoadError:
            _out("Could not BEFFile::Open fib.bef.")
            return 1
        for fn in bef.functions:
            if fn.num_arguments:
                _out(f"--- Not running '{fn.name}' because it has arguments.")
                continue
            if not fn.name:
                continue
            _out(f"--- Running '{fn.name}':")
            results = fn.execute(ExecutionContext(host.new_request(None)), [])
            host.await_values(results)
            if results:
                shown = [format_result(r, t, False)
                         for r, t in zip(results, fn.result_types, strict=True)]
                _out(f"'{fn.name}' returned {','.join(shown)}")
            for r in results:
                r.drop_ref()
    finally:
        host.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
