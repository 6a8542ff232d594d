"""``pytfrt.compile``: any supported source model -> :class:`~pytfrt.model.CompiledModel`.

Dispatch on the object:

* a :class:`~pytfrt.compiler.builder.GraphModule` -- as is;
* an ``onnx.ModelProto``, or a path ending in ``.onnx`` -- the ONNX front end
  (``pytfrt.compiler.frontends.onnx.import_onnx``);
* a ``tf.function``, a Keras model, a SavedModel directory or a ``.keras``/``.h5`` file -- the
  TensorFlow front end (``pytfrt.compiler.frontends.tf.import_tf``);
* a ``.mlir`` file of the graph dialect -- parsed (weights zero-filled).

Then the default pass pipeline (when present) and the lowering.  Front ends are imported
lazily, so ``import pytfrt`` never loads TensorFlow or ONNX.

Inputs follow the source framework's dtype rule (``Signature.casting``): a TensorFlow or Keras
model converts numbers to its input dtypes as Keras does (float64 arrays, Python scalars and
lists), an ONNX model takes exactly its input dtypes as ONNX Runtime does.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.errors import GraphError
from pytfrt.host.host_context import HostContext
from pytfrt.model import CompiledModel


def to_graph(obj: Any, input_signature: Any = None, *, signature: str | None = None
             ) -> GraphModule:
    """The graph module of a source model (see the module docstring).

    Raises:
        GraphError: for an object of no known kind.
        UnsupportedOpError: (from a front end) for a source op the dialect cannot express.
    """
    if isinstance(obj, GraphModule):
        return obj
    if isinstance(obj, str | os.PathLike):
        path = Path(obj)
        suffix = path.suffix.lower()
        if suffix == ".onnx":
            from pytfrt.compiler.frontends.onnx import import_onnx  # type: ignore[import-not-found]

            return import_onnx(obj, input_signature)  # type: ignore[no-any-return]
        if suffix == ".mlir":
            return parse_graph(path.read_text(), str(path))
        if path.is_dir() or suffix in (".keras", ".h5"):
            from pytfrt.compiler.frontends.tf import import_tf  # type: ignore[import-not-found]

            return _casting(import_tf(obj, input_signature, signature=signature))
        raise GraphError(f"cannot compile '{obj}': expected a SavedModel directory, a .keras/.h5 "
                         "file, an .onnx file or a .mlir file of the graph dialect")
    mod = type(obj).__module__ or ""
    if mod.startswith("onnx"):
        from pytfrt.compiler.frontends.onnx import import_onnx

        return import_onnx(obj, input_signature)  # type: ignore[no-any-return]
    if mod.startswith(("tensorflow", "keras", "tf_keras")) or hasattr(obj, "get_concrete_function"):
        from pytfrt.compiler.frontends.tf import import_tf

        return _casting(import_tf(obj, input_signature, signature=signature))
    raise GraphError(f"cannot compile an object of type {type(obj).__module__}."
                     f"{type(obj).__qualname__}")


def _casting(gm: GraphModule) -> GraphModule:
    """``gm`` with Keras's input rule: inputs of another numeric dtype are converted."""
    gm.signature = dataclasses.replace(gm.signature, casting="cast")
    return gm


def parse_graph(text: str, filename: str = "<string>") -> GraphModule:
    """A GraphModule from the MLIR text of a graph-dialect module (no weights).

    Raises:
        pytfrt.mlir.MlirError: for a parse or verification error.
    """
    from pytfrt.compiler.builder import signature_of
    from pytfrt.mlir.api import parse_source, verify_module

    parsed = parse_source(text, filename)
    verify_module(parsed)
    return GraphModule(parsed.module, {}, signature_of(parsed.module), zero_fill=True)


def compile_module(gm: GraphModule, *, optimize: bool = True,
                   host: HostContext | str | None = None) -> CompiledModel:
    """Optimise (the default pipeline, if ``optimize``) and lower ``gm``; a CompiledModel
    running on ``host`` (see :func:`pytfrt.model.resolve_host`)."""
    return _compile_module(gm, optimize=optimize, host=host, consume=False)


def _compile_module(gm: GraphModule, *, optimize: bool, host: HostContext | str | None,
                    consume: bool) -> CompiledModel:
    """:func:`compile_module`; with ``consume``, ``gm`` is the caller's to discard: its
    weights are dropped once lowered, and the model receives them as a one-shot iterator,
    so that each array a kernel packs into a form of its own is freed as it is packed (the
    compile never holds every weight twice)."""
    from pytfrt.compiler.lowering import lower

    if optimize:
        try:
            from pytfrt.compiler.passes import default_pipeline
        except ImportError:
            pass
        else:
            gm = default_pipeline(gm)
    if consume and _weight_bytes(gm) >= COLLECT_BYTES:
        # the passes leave replaced constants in reference cycles: free them before lowering
        # and packing add their own arrays (a full collection costs ~0.2 s in a process that
        # has imported TensorFlow: only worth it for large weights)
        gc.collect()
    low = lower(gm)
    if not consume:
        return CompiledModel(low.program, [low.weights[n] for n in low.init_inputs],
                             low.signature, low.num_resources, low.init_inputs, low.variables,
                             host)
    gm.weights.clear()
    weights = low.weights
    names = list(low.init_inputs)
    program, sig, n_res, variables = low.program, low.signature, low.num_resources, low.variables
    del low
    return CompiledModel(program, _moved(weights, names), sig, n_res, names, variables, host)


COLLECT_BYTES = 16 << 20
"""A consumed compile whose weights total at least this many bytes collects garbage after the
passes (the constants they replaced), before lowering copies anything."""


def _weight_bytes(gm: GraphModule) -> int:
    return sum(getattr(w, "nbytes", 0) for w in gm.weights.values())


def _moved(weights: dict[str, Any], names: list[str]) -> Iterator[Any]:
    """The arrays of ``names``, each taken out of ``weights`` and moved into pages of its own
    (:func:`pytfrt.model.own_pages`), the heap trimmed after each large one: the model gets
    the only references, and the arrays kernels replace by prepared copies are freed at
    once."""
    from pytfrt.model import TRIM_BYTES, own_pages, trim_heap

    freed = 0
    for n in names:
        w = weights.pop(n)
        moved = own_pages(w) if isinstance(w, np.ndarray) else w
        if moved is not w:
            freed += w.nbytes
            del w
            if freed >= TRIM_BYTES:
                trim_heap()
                freed = 0
        yield moved


def compile(obj: Any, input_signature: Any = None, *, signature: str | None = None,  # noqa: A001
            optimize: bool = True, host: HostContext | str | None = None) -> CompiledModel:
    """Compile a model (see the module docstring) into a :class:`CompiledModel`.

    Args:
        obj: the source model.
        input_signature: input specs for sources without fixed ones (e.g. a ``tf.function``
            without an input signature); passed to the front end.
        signature: the SavedModel signature key (TensorFlow front end).
        optimize: run the default pass pipeline.
        host: the HostContext the model runs on, a work-queue type string (``"mstd:1"``) for
            a new one, or ``None`` for ``pytfrt.model.default_host()``.

    Raises:
        GraphError / UnsupportedOpError: the model cannot be expressed or is malformed.
    """
    gm = to_graph(obj, input_signature, signature=signature)
    # the source for pytfrt.quantize; the passes rewrite a GraphModule given as is in place
    source = gm.copy() if gm is obj and optimize else obj
    model = _compile_module(gm, optimize=optimize, host=host, consume=gm is not obj)
    model.source = (source, input_signature, signature)
    return model


@functools.cache
def fingerprint() -> str:
    """A digest of this compiler: pytfrt's version and the source of every compiler module.

    Two processes with the same fingerprint compile a model to the same program, so it keys
    caches of compiled models (``pytfrt serve --compile_cache_dir``): a changed pass, front end
    or lowering invalidates them even when the version string did not move. Thread-safe
    (computed once per process); reads the package's ``.py`` files.
    """
    import hashlib  # here, not at the top: OpenSSL's library costs a compile ~3.5 MB of memory

    import pytfrt

    digest = hashlib.sha256(getattr(pytfrt, "__version__", "0").encode() + b"\0")
    root = Path(__file__).resolve().parent
    for file in sorted(root.rglob("*.py")):
        digest.update(file.relative_to(root).as_posix().encode() + b"\0")
        digest.update(file.read_bytes() + b"\0")
    return digest.hexdigest()
