"""``pytfrt serve``: TensorFlow Serving's REST API over pytfrt (flags named as
``tensorflow_model_server``'s).

Serve one model (``--model_name``, ``--model_base_path``) or several (``--model_config_file``,
TF Serving's text-proto ``model_config_list``); ``--backend`` picks what runs them (pytfrt's
compiled models by default; ``tensorflow`` and ``onnxruntime`` are the baselines behind the same
HTTP layer).  See ``docs/serving.md``.  The implementation is :mod:`pytfrt.serving`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _flag_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes"):
        return True
    if lowered in ("0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytfrt" / "serving"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``pytfrt serve``."""
    parser.add_argument("--rest_api_port", type=int, default=8501,
                        help="port of the HTTP/REST API (0: pick a free one; default 8501)")
    parser.add_argument("--rest_api_host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--model_name", default="default",
                        help="name of the model served from --model_base_path (default 'default')")
    parser.add_argument("--model_base_path", default=None,
                        help="directory holding one sub-directory per model version")
    parser.add_argument("--model_config_file", default=None,
                        help="text-proto model_config_list (several models); replaces "
                             "--model_name/--model_base_path")
    parser.add_argument("--enable_batching", nargs="?", const=True, default=False,
                        type=_flag_bool, help="merge concurrent requests into batches")
    parser.add_argument("--batching_parameters_file", default=None,
                        help="text-proto batching parameters (max_batch_size, "
                             "batch_timeout_micros, num_batch_threads, max_enqueued_batches)")
    parser.add_argument("--file_system_poll_wait_seconds", type=float, default=1.0,
                        help="seconds between polls for new versions (<= 0: poll once at start)")
    parser.add_argument("--work_queue_type", default="mstd",
                        help='the runtime work queue: "s", "mstd", "mstd:N" or "mstd:N,M" '
                             "(default mstd)")
    parser.add_argument("--backend", default="pytfrt",
                        choices=("pytfrt", "tensorflow", "onnxruntime"),
                        help="what runs the models (default pytfrt)")
    parser.add_argument("--max_request_bytes", type=int, default=64 * 1024 * 1024,
                        help="largest request body accepted; larger ones get HTTP 413 "
                             "(default 64 MiB)")
    parser.add_argument("--tensorflow_intra_op_parallelism", type=int, default=0,
                        help="threads one model call may use, for every backend (0: each "
                             "library's default)")
    parser.add_argument("--compile_cache_dir", type=Path, default=None,
                        help="where the pytfrt backend caches models it compiles "
                             "(default $XDG_CACHE_HOME/pytfrt/serving)")
    parser.add_argument("--http_parser", default="auto",
                        help="uvicorn's HTTP implementation: auto (httptools if installed, else "
                             "h11), h11 or httptools (default auto)")
    parser.add_argument("--event_loop", default="auto",
                        help="the event loop: auto (uvloop if installed, else asyncio), asyncio "
                             "or uvloop (default auto)")


def run(args: argparse.Namespace) -> int:
    """Validate the flags, then serve until SIGTERM (exit status 0 after a clean drain)."""
    if args.tensorflow_intra_op_parallelism < 0:
        print("pytfrt serve: error: --tensorflow_intra_op_parallelism must not be negative",
              file=sys.stderr)
        return 2
    if args.tensorflow_intra_op_parallelism > 0:
        # Read by the BLAS and OpenMP libraries when NumPy loads and by pytfrt's conv kernels
        # (PYTFRT_NUM_THREADS, pytfrt.backends.cpu._parallel) when they are imported, neither
        # of which has happened yet when the command runs as a program (in-process callers
        # that loaded them already keep the library's default).
        threads = str(args.tensorflow_intra_op_parallelism)
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                     "PYTFRT_NUM_THREADS"):
            os.environ[name] = threads
    from pytfrt.host.work_queue import parse_work_queue_type
    from pytfrt.serving.config import (
        ConfigError,
        ModelConfig,
        load_batching_parameters,
        load_model_config,
    )
    from pytfrt.serving.server import ServerOptions, resolve_http, resolve_loop, run_server

    def fail(message: str) -> int:
        print(f"pytfrt serve: error: {message}", file=sys.stderr)
        return 2

    try:
        parse_work_queue_type(args.work_queue_type)
        resolve_http(args.http_parser)
        resolve_loop(args.event_loop)
        if args.model_config_file and args.model_base_path:
            return fail("give either --model_config_file or --model_base_path, not both")
        if args.model_config_file:
            models = load_model_config(args.model_config_file)
        elif args.model_base_path:
            models = [ModelConfig(args.model_name, Path(args.model_base_path).resolve())]
        else:
            return fail("give --model_base_path (one model) or --model_config_file")
        batching = None
        if args.batching_parameters_file and not args.enable_batching:
            return fail("--batching_parameters_file needs --enable_batching")
        if args.enable_batching:
            from pytfrt.serving.config import BatchingParameters

            batching = (load_batching_parameters(args.batching_parameters_file)
                        if args.batching_parameters_file else BatchingParameters())
    except (ConfigError, ValueError) as exc:
        return fail(str(exc))
    if args.max_request_bytes < 1:
        return fail("--max_request_bytes must be positive")
    if not 0 <= args.rest_api_port <= 65535:
        return fail(f"--rest_api_port {args.rest_api_port} is not a port number")
    options = ServerOptions(
        models=models,
        backend=args.backend,
        rest_api_host=args.rest_api_host,
        rest_api_port=args.rest_api_port,
        work_queue_type=args.work_queue_type,
        batching=batching,
        poll_seconds=args.file_system_poll_wait_seconds,
        max_request_bytes=args.max_request_bytes,
        cache_dir=args.compile_cache_dir or _default_cache_dir(),
        intra_op_parallelism=args.tensorflow_intra_op_parallelism,
        http_parser=args.http_parser,
        event_loop=args.event_loop,
    )
    try:
        return run_server(options)
    except OSError as exc:
        return fail(f"cannot listen on {args.rest_api_host}:{args.rest_api_port}: {exc.strerror}")
