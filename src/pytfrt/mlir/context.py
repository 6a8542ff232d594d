"""The xDSL context with every TFRT dialect (built once per process, cloned per parse).

Dialects: ``builtin`` and ``func`` (xDSL's), ``tfrt``, ``tfrt_test``, ``tfrt_dht``, ``ts``,
``coo``, ``t``, ``tfrt_sht``, ``btf``, ``eigen``, ``vt``, ``tfrt_tutorial``, ``corert``,
``test``, ``my``, ``ht``, and the dialects of :data:`EXTRA_DIALECTS` (named by module so this
layer imports none of them, and loaded only when a file uses them: ``tg``, the compiler's graph
dialect).  Unregistered ops are
allowed (they run as kernels of the same name);
``tfrt_opt`` rejects ops of unknown *dialects* itself unless ``--allow-unregistered-dialect``.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable

from xdsl.context import Context
from xdsl.ir import Dialect

_LOCK = threading.Lock()
_BASE: Context | None = None

#: Dialect names whose unknown ops are still accepted by ``tfrt_opt`` without the flag.
KNOWN_DIALECTS = frozenset(
    {
        "builtin", "func", "tfrt", "tfrt_test", "tfrt_dht", "ts", "coo", "t", "tfrt_tensor",
        "tfrt_sht",
        "btf", "eigen", "vt", "tfrt_tutorial", "corert", "test", "my", "ht", "tg",
        "tfrt_dht_sync", "tfrt_sht_sync", "corert_sync",
    }
)  # fmt: skip


#: ``(dialect name, module, factory)`` of dialects defined above this layer, registered lazily:
#: the module is imported only when a file uses the dialect (xDSL's ``register_dialect``).
EXTRA_DIALECTS: tuple[tuple[str, str, str], ...] = (
    ("tg", "pytfrt.compiler.dialect", "tg_dialect"),
)


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
    for name, module_name, factory in EXTRA_DIALECTS:
        ctx.register_dialect(name, _lazy_dialect(name, module_name, factory))
    return ctx


def _lazy_dialect(name: str, module_name: str, factory: str) -> Callable[[], Dialect]:
    """A factory importing ``module_name`` on first use (an empty dialect if it is absent)."""

    def load() -> Dialect:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            return Dialect(name, [], [])
        return getattr(module, factory)()  # type: ignore[no-any-return]

    return load


def make_context() -> Context:
    """A fresh context (a clone of the process-wide one); thread-safe."""
    global _BASE
    with _LOCK:
        if _BASE is None:
            _BASE = _build()
        return _BASE.clone()
