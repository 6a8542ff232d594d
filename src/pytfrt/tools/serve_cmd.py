"""``pytfrt serve``: TensorFlow Serving's REST API over pytfrt (flags named as
``tensorflow_model_server``'s).

Serve one model (``--model_name``, ``--model_base_path``) or several (``--model_config_file``,
TF Serving's text-proto ``model_config_list``); ``--backend`` picks what runs them (pytfrt's
compiled models by default; ``tensorflow`` and ``onnxruntime`` are the baselines behind the same
HTTP layer).  See ``docs/serving.md``.  The implementation is :mod:`pytfrt.serving`.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Final, NoReturn

SERVE_EXTRA_MODULES: Final = ("uvicorn", "grpc", "google.protobuf", "grpc_tools")
"""What the ``[serve]`` extra installs and the server imports."""
MISSING_EXTRA: Final = ("pytfrt serve: error: the server needs the serve extra: "
                        "pip install 'pytfrt[serve]'")

TF_SERVING_FLAGS: Final = frozenset({
    "port", "grpc_socket_path", "rest_api_num_threads", "rest_api_enable_cors_support",
    "enable_model_warmup", "num_request_iterations_for_warmup",
    "model_config_file_poll_wait_seconds",
    "max_num_load_retries", "load_retry_interval_micros", "file_system_poll_wait_seconds",
    "flush_filesystem_caches", "tensorflow_session_parallelism",
    "tensorflow_inter_op_parallelism", "ssl_config_file", "platform_config_file",
    "per_process_gpu_memory_fraction", "saved_model_tags", "grpc_channel_arguments",
    "enable_signature_method_name_check", "xla_cpu_compilation_enabled",
    "enable_profiler", "mixed_precision", "skip_initialize_tpu", "use_tflite_model",
    "prefer_tflite_model", "num_tflite_pools", "num_tflite_interpreters_per_pool",
    "remove_unused_fields_from_bundle_metagraph", "thread_pool_factory_config_file",
    "use_alts_credentials", "enable_batching", "allow_version_labels_for_unavailable_models",
    "tensorflow_intra_op_parallelism", "batching_parameters_file", "monitoring_config_file",
    "rest_api_timeout_in_ms", "grpc_max_threads", "model_name", "model_base_path",
    "model_config_file", "rest_api_port", "version",
})
"""``tensorflow_model_server``'s flags (those pytfrt serve does not take get a message naming
them as TF Serving flags)."""


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


def _unknown_flags_error(parser: argparse.ArgumentParser) -> None:
    """Make ``parser`` name each unknown flag (a TF Serving flag pytfrt serve does not take, or
    not a flag of either) instead of argparse's generic ``unrecognized arguments``."""
    generic = parser.error

    def error(message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: "):
            flags = [a for a in message[len("unrecognized arguments: "):].split()
                     if a.startswith("-")]
            for arg in flags or message.split()[2:3]:
                name = re.sub(r"^-+", "", arg.split("=", 1)[0])
                if name in TF_SERVING_FLAGS:
                    print(f"pytfrt serve: error: --{name} is a tensorflow_model_server flag "
                          "that pytfrt serve does not support (pytfrt serve --help lists "
                          "the flags it takes)", file=sys.stderr)
                else:
                    print(f"pytfrt serve: error: unknown flag {arg.split('=', 1)[0]} "
                          "(pytfrt serve --help lists the flags it takes)", file=sys.stderr)
            sys.exit(2)
        generic(message)

    parser.error = error  # type: ignore[method-assign]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``pytfrt serve``."""
    _unknown_flags_error(parser)
    parser.add_argument("--port", type=int, default=8500,
                        help="port of the gRPC API (TF Serving's PredictionService and "
                             "ModelService, KServe's GRPCInferenceService; 0: pick a free one; "
                             "default 8500)")
    parser.add_argument("--grpc_max_threads", type=int, default=0,
                        help="threads serving gRPC calls (0: 4 per CPU, TF Serving's default)")
    parser.add_argument("--rest_api_timeout_in_ms", type=int, default=30000,
                        help="a REST request not answered in time gets HTTP 504 (default 30000; "
                             "<= 0: no limit)")
    parser.add_argument("--enable_model_warmup", nargs="?", const=True, default=True,
                        type=_flag_bool,
                        help="replay each version's assets.extra/tf_serving_warmup_requests "
                             "before it serves (default true)")
    parser.add_argument("--monitoring_config_file", default=None,
                        help="text-proto MonitoringConfig: prometheus_config { enable: true "
                             "path: '/monitoring/prometheus/metrics' }")
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


def _missing_extra() -> bool:
    for name in SERVE_EXTRA_MODULES:
        try:
            if importlib.util.find_spec(name) is None:
                return True
        except (ModuleNotFoundError, ValueError):  # a missing parent package ("google")
            return True
    return False


def run(args: argparse.Namespace) -> int:
    """Validate the flags, then serve until SIGTERM (exit status 0 after a clean drain)."""
    if _missing_extra():
        print(MISSING_EXTRA, file=sys.stderr)
        return 2
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
        load_monitoring_config,
    )
    from pytfrt.serving.server import (
        ListenError,
        ServerOptions,
        resolve_http,
        resolve_loop,
        run_server,
    )

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
        monitoring = (load_monitoring_config(args.monitoring_config_file)
                      if args.monitoring_config_file else None)
    except (ConfigError, ValueError) as exc:
        return fail(str(exc))
    if args.max_request_bytes < 1:
        return fail("--max_request_bytes must be positive")
    for flag in ("rest_api_port", "port"):
        if not 0 <= getattr(args, flag) <= 65535:
            return fail(f"--{flag} {getattr(args, flag)} is not a port number")
    if args.grpc_max_threads < 0:
        return fail("--grpc_max_threads must not be negative")
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
        grpc_port=args.port,
        grpc_max_threads=args.grpc_max_threads or 4 * (os.cpu_count() or 1),
        rest_api_timeout_seconds=(args.rest_api_timeout_in_ms / 1000
                                  if args.rest_api_timeout_in_ms > 0 else None),
        model_warmup=args.enable_model_warmup,
        monitoring=monitoring,
    )
    try:
        return run_server(options)
    except ListenError as exc:
        return fail(str(exc))
