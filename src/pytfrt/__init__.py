"""pytfrt: TFRT, TensorFlow's new runtime, as a Python package.

Layout, in pipeline order (see ``docs/layout.md``):

* :mod:`pytfrt.support` -- errors, locations, configuration (stdlib only).
* :mod:`pytfrt.host` -- AsyncValue, Chain, work queues, HostContext, ExecutionContext,
  diagnostics and the kernel registry: everything a kernel runs on.
* :mod:`pytfrt.bef` -- the plain ``Program`` model and the Binary Executable Format.
* :mod:`pytfrt.executor` -- the dataflow executor that runs BEF functions.
* :mod:`pytfrt.kernels` -- the ``tfrt.*`` and ``tfrt_test.*`` kernels.
* :mod:`pytfrt.tensor` and :mod:`pytfrt.backends.cpu` -- tensors and CPU kernels.
* :mod:`pytfrt.core_runtime` -- eager op-by-op execution.
* :mod:`pytfrt.mlir` -- the MLIR front end on xDSL (the only layer that imports xDSL).
* :mod:`pytfrt.tools` -- ``bef_executor``, ``tfrt_translate``, ``tfrt_opt``, ``pytfrt``.

* :mod:`pytfrt.compiler` -- the graph dialect, its passes and lowering; :mod:`pytfrt.model` --
  ``CompiledModel``; :mod:`pytfrt.function` -- ``@pytfrt.function``, ``grad``,
  ``value_and_grad``, ``cond``, ``switch_case``, ``while_loop`` (Python traced into the graph
  dialect).

Importing :mod:`pytfrt` imports nothing heavy and changes no global state:
:func:`compile`, :func:`load`, :class:`CompiledModel`, :func:`function`, :func:`grad`,
:func:`value_and_grad`, :func:`cond`, :func:`switch_case`, :func:`while_loop`, :func:`quantize` and
the errors a
user meets (``InputError``, ``ModelError``, ``GraphError``, ``UnsupportedOpError``) are imported
on first use.
"""

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "compile": ("pytfrt.compiler.api", "compile"),
    "load": ("pytfrt.model", "load"),
    "CompiledModel": ("pytfrt.model", "CompiledModel"),
    "function": ("pytfrt.function", "function"),
    "grad": ("pytfrt.function", "grad"),
    "value_and_grad": ("pytfrt.function", "value_and_grad"),
    "cond": ("pytfrt.function", "cond"),
    "while_loop": ("pytfrt.function", "while_loop"),
    "switch_case": ("pytfrt.function", "switch_case"),
    "quantize": ("pytfrt.quantization", "quantize"),
    "InputError": ("pytfrt.model", "InputError"),
    "ModelError": ("pytfrt.model", "ModelError"),
    "GraphError": ("pytfrt.compiler.errors", "GraphError"),
    "UnsupportedOpError": ("pytfrt.compiler.errors", "UnsupportedOpError"),
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'pytfrt' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(target[0]), target[1])
