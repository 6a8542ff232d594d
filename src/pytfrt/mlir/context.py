"""The xDSL context with every TFRT dialect (built once per process, cloned per parse).

Dialects: ``builtin`` and ``func`` (xDSL's), ``tfrt``, ``tfrt_test``, ``tfrt_dht``, ``ts``,
``coo``, ``t``, ``tfrt_sht``, ``btf``, ``eigen``, ``vt``, ``tfrt_tutorial``, ``corert``,
``test``, ``my``, ``ht``, and the dialects of :data:`EXTRA_DIALECTS` (named by module so this
layer imports none of them: ``tg``, the compiler's graph dialect).  Unregistered ops are
allowed (they run as kernels of the same name);
``tfrt_opt`` rejects ops of unknown *dialects* itself unless ``--allow-unregistered-dialect``.
"""

from __future__ import annotations

import threading

from xdsl.context import Context

_LOCK = threading.Lock()
_BASE: Context | None = None

#: Dialect names whose unknown ops are still accepted by ``tfrt_opt`` without the flag.
KNOWN_DIALECTS = frozenset(
    {
        "builtin", "func", "tfrt", "tfrt_test", "tfrt_dht", "ts", "coo", "t", "tfrt_sht",
        "btf", "eigen", "vt", "tfrt_tutorial", "corert", "test", "my", "ht", "tg",
        "tfrt_dht_sync", "tfrt_sht_sync", "corert_sync",
    }
)  # fmt: skip


#: ``(module, factory)`` of dialects defined above this layer, loaded when they exist.
EXTRA_DIALECTS: tuple[tuple[str, str], ...] = (("pytfrt.compiler.dialect", "tg_dialect"),)


def _build() -> Context:
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    from pytfrt.mlir.dialect_corert import corert_dialect, corert_sync_dialect
    from pytfrt.mlir.dialect_tensor import tensor_dialects
    from pytfrt.mlir.dialect_test import tfrt_test_dialect
    from pytfrt.mlir.dialect_tfrt import tfrt_dialect

    ctx = Context(allow_unregistered=True)
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Func)
    dialects = [tfrt_dialect(), tfrt_test_dialect(), corert_dialect(), corert_sync_dialect()]
    for dialect in [*dialects, *tensor_dialects()]:
        ctx.load_dialect(dialect)
    import importlib

    for module_name, factory in EXTRA_DIALECTS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        ctx.load_dialect(getattr(module, factory)())
    return ctx


def make_context() -> Context:
    """A fresh context (a clone of the process-wide one); thread-safe."""
    global _BASE
    with _LOCK:
        if _BASE is None:
            _BASE = _build()
        return _BASE.clone()
