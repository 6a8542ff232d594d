"""``tfrt_opt``: parse, verify and print TFRT MLIR, as ``mlir-opt`` does (docs/conformance.md).

Usage::

    tfrt_opt [in.mlir | -] [-o out] [--mlir-print-op-generic] [--split-input-file]
             [--verify-diagnostics] [--allow-unregistered-dialect] [-tfrt-print-stream]
             [-canonicalize] [-inline]

Output is the module in custom syntax (``func.func``, ``%0``/``%arg0`` names); with
``--split-input-file`` the chunks' outputs are separated by ``// -----``.
``-tfrt-print-stream`` emits, for every op of every function body, the remark
``stream id: <id>, stream cost: <cost>, parent stream: <pid>[, child streams: [..]]``
(docs/executor.md).  ``-inline`` inlines calls to functions with bodies and drops unreferenced
private functions; ``-canonicalize`` applies the ``tfrt.merge.chains`` canonicalization
(:mod:`pytfrt.mlir.passes`); ``-inline`` runs before ``-canonicalize`` when both are given.
The graph-dialect passes (``-tg-infer-shapes``, ``-tg-fold-quant``, ``-tg-constant-fold``,
``-tg-cse``, ``-tg-dce``, ``-tg-fold-batch-norm``, ``-tg-layout-nhwc``, ``-tg-fuse-attention``,
``-tg-merge-matmuls``, ``-tg-fuse-epilogue``,
``-tg-matmul-weight-layout``, ``-tg-fuse-squeeze-excite``, ``-tg-fold-pad``,
``-tg-fuse-batch-stats``, ``-tg-fuse-optimizer``,
``-tg-flatten-weight-grads``, ``-tg-fold-reshapes``, ``-tg-fuse-layer-norm-grad``,
``-tg-fuse-softmax-grad``, ``-tg-fuse-attention-grad``, ``-tg-pair-conv-grads``,
``-tg-shape-plans``, ``-tg-fuse-elementwise``,
``-tg-fuse-small-graph``, ``-tg-conv-nchw-input``, ``-tg-dnnl-blocked``, ``-tg-plan-buffers``,
``-tg-default-pipeline``) run in command-line order (:mod:`pytfrt.compiler.passes.opt`);
``-tg-print-after-all`` also prints the module after each of them, to stderr.
Without ``--allow-unregistered-dialect`` ops of unknown dialects are rejected;
unknown ops of TFRT's dialects are accepted in generic form.  Flags take one or two dashes.
Exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import sys


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise _ArgError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tfrt_opt", description="TFRT MLIR optimizer driver (parse/verify/print)")
    p.add_argument("input", nargs="?", default="-", help="input file ('-' = stdin)")
    p.add_argument("-o", dest="output", default="-", help="output file (default stdout)")
    p.add_argument("--mlir-print-op-generic", action="store_true", help="print generic form")
    p.add_argument("--split-input-file", action="store_true", help="split on '// -----'")
    p.add_argument("--verify-diagnostics", action="store_true", help="check expected-* lines")
    p.add_argument(
        "--allow-unregistered-dialect", action="store_true", help="accept unknown dialects"
    )
    p.add_argument("--tfrt-print-stream", action="store_true", help="print stream analysis")
    p.add_argument("--canonicalize", action="store_true", help="canonicalize merge.chains")
    p.add_argument("--inline", action="store_true", help="inline calls to function bodies")
    for name in TG_PASSES:
        p.add_argument(f"--{name}", dest="tg_passes", action="append_const", const=name,
                       help=f"graph pass {name}")
    p.add_argument("--tg-print-after-all", action="store_true",
                   help="print the module after each graph pass (stderr)")
    return p


# The graph-dialect pass flags (pytfrt.compiler.passes.opt.FLAGS; named here so building the
# parser imports nothing).
TG_PASSES = (
    "tg-infer-shapes", "tg-fold-quant", "tg-constant-fold", "tg-cse", "tg-fuse-layer-norm",
    "tg-dce",
    "tg-fold-batch-norm",
    "tg-layout-nhwc", "tg-fuse-attention", "tg-merge-matmuls", "tg-fuse-epilogue",
    "tg-fuse-add-layer-norm", "tg-matmul-weight-layout",
    "tg-fuse-squeeze-excite",
    "tg-fold-pad", "tg-fuse-batch-stats", "tg-fuse-optimizer",
    "tg-flatten-weight-grads", "tg-fold-reshapes", "tg-fuse-layer-norm-grad",
    "tg-fuse-softmax-grad",
    "tg-fuse-attention-grad",
    "tg-pair-conv-grads",
    "tg-shape-plans",
    "tg-fuse-elementwise",
    "tg-fuse-small-graph",
    "tg-conv-nchw-input",
    "tg-dnnl-blocked",
    "tg-plan-buffers",
    "tg-default-pipeline",
)


def _stream_remarks(parsed) -> list:  # type: ignore[no-untyped-def]
    from pytfrt.bef.streams import analyze_streams
    from pytfrt.mlir.lowering import lower_module_with_ops

    program, function_ops = lower_module_with_ops(
        parsed.module,
        parsed.source.name,
        parsed.positions,
        parsed.source,
        parsed.explicit_unknown,
    )
    from xdsl.dialects.func import FuncOp

    funcs = {op.sym_name.data: op for op in parsed.module.walk() if isinstance(op, FuncOp)}
    diags = []
    for fn, ops in zip(program.functions, function_ops, strict=True):
        if ops is None:
            continue
        analysis = analyze_streams(fn)
        facts = [*analysis.kernels, analysis.return_op]
        for op, fact in zip(ops, facts, strict=True):
            diags.append(parsed.diagnostic(op, fact.remark(), "remark"))
        func = funcs.get(fn.name) if fn.name else None
        if func is not None:  # the function itself: its root stream
            diags.append(parsed.diagnostic(func, analysis.root.remark(), "remark"))
    diags.sort(key=lambda d: (d.line, d.col))
    return diags


def _is_kernel(name: str) -> bool:
    """Whether a built-in kernel library (or an installed plugin) defines ``name``."""
    from pytfrt.kernel_libraries import builtin_registry

    return name in builtin_registry()


def _process(chunk: str, name: str, args: argparse.Namespace, sink) -> str | None:  # type: ignore[no-untyped-def]
    from pytfrt.mlir.api import check_registered, parse_source, verify_module
    from pytfrt.mlir.diagnostics import MlirError
    from pytfrt.mlir.printer import print_module

    try:
        parsed = parse_source(chunk, name)
        if not args.allow_unregistered_dialect:
            check_registered(parsed, _is_kernel)
        verify_module(parsed)
        if args.tfrt_print_stream:
            sink.emit(_stream_remarks(parsed))
        if args.inline or args.canonicalize:
            from pytfrt.mlir.passes import canonicalize, inline_calls

            if args.inline:
                inline_calls(parsed.module)
            if args.canonicalize:
                canonicalize(parsed.module)
        if args.tg_passes:
            from pytfrt.compiler.errors import GraphError
            from pytfrt.compiler.passes.opt import run_on_module

            try:
                run_on_module(parsed.module, args.tg_passes, args.tg_print_after_all,
                              sys.stderr)
            except GraphError as exc:
                print(f"{name}: error: {exc}", file=sys.stderr)
                sink.had_error = True
                return None
    except MlirError as err:
        sink.error(err)
        return None
    return print_module(parsed.module, generic=args.mlir_print_op_generic)


def main(argv: list[str] | None = None) -> int:
    """Run the tool; returns the exit status."""
    from pytfrt.mlir.driver import DiagnosticSink, normalize_argv, read_input, split_input

    argv = normalize_argv(sys.argv[1:] if argv is None else argv)
    try:
        args = _parser().parse_args(argv)
    except _ArgError as err:
        print(f"tfrt_opt: {err}", file=sys.stderr)
        return 1
    name = "<stdin>" if args.input == "-" else args.input
    try:
        text = read_input(args.input)
    except OSError as err:
        print(f"tfrt_opt: cannot open '{err.filename}': {err.strerror}", file=sys.stderr)
        return 1
    except UnicodeDecodeError:
        print("tfrt_opt: input is not valid UTF-8 text", file=sys.stderr)
        return 1
    assert isinstance(text, str)
    sink = DiagnosticSink(name, text, args.verify_diagnostics)
    outputs = []
    for chunk in split_input(text, args.split_input_file):
        out = _process(chunk, name, args, sink)
        if out is not None:
            outputs.append(out)
    ok = sink.finish()
    result = "// -----\n".join(outputs)
    try:
        if args.output == "-":
            sys.stdout.write(result)
            sys.stdout.flush()
        else:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(result)
    except OSError as err:
        print(f"tfrt_opt: cannot write '{args.output}': {err.strerror}", file=sys.stderr)
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
