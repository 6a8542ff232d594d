"""ONNX's backend API (``onnx.backend.base``) over :func:`pytfrt.compile`.

``pytfrt.onnx_backend`` is what ONNX's own test runner (``onnx.backend.test.BackendTest``) and
other ONNX tooling call: :meth:`PytfrtBackend.prepare` turns a ``ModelProto`` into a
:class:`PytfrtBackendRep`, whose ``run`` takes the graph inputs (a list in graph-input order,
a mapping by name, or one array) and returns the graph outputs as a tuple in graph-output
order.  :func:`run_model`, :func:`run_node`, :func:`prepare` and :func:`supports_device` are the
module-level functions ONNX's runner expects of a backend module.

How a model is compiled: once per distinct input signature (shapes and dtypes of the
arguments), with the call's shapes fixed, so the importer sees static shapes.  When the model
passes an operand the graph dialect takes as an attribute (axes, ``k``, pads, scales, a target
shape) as a graph input, that input is specialised on: the model is compiled with its value
baked in, once per distinct value (see
:class:`pytfrt.compiler.frontends.onnx_specialize.SpecializingModel`).

A sequence-typed graph input is given as a list of arrays (the model is specialised on the
list's length and element shapes: each element is one argument of the compiled model), and a
sequence-typed output comes back as a list of arrays.  Optional-typed graph inputs and outputs
are not supported.

Only the CPU device is supported.  Errors: an op the importer cannot express raises
:class:`pytfrt.compiler.UnsupportedOpError` (from ``prepare`` when it can tell at once, else
from the first ``run``); a kernel failure raises :class:`pytfrt.model.ModelError`.

Thread-safety: a prepared model may be run from several threads (its compile cache is locked).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from pytfrt.compiler.frontends.onnx_specialize import SpecializingModel

__all__ = [
    "PytfrtBackend",
    "PytfrtBackendRep",
    "prepare",
    "run_model",
    "run_node",
    "supports_device",
]


class PytfrtBackendRep(BackendRep):
    """A prepared ONNX model: ``run(inputs)`` -> tuple of the graph outputs."""

    def __init__(self, model: onnx.ModelProto, host: Any = None) -> None:
        self.model = model
        self._runner = SpecializingModel(model, host)
        self.input_names = self._runner.input_names
        self.output_names = self._runner.output_names

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Run on ``inputs`` (list in graph-input order, mapping by name, or one array)."""
        del kwargs
        if isinstance(inputs, Mapping):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise ValueError(f"missing inputs {missing}; the model takes {self.input_names}")
            args = [inputs[n] for n in self.input_names]
        elif isinstance(inputs, np.ndarray) or not isinstance(inputs, Sequence):
            args = [inputs]
        else:
            args = list(inputs)
        return tuple(self._runner(args))


class PytfrtBackend(Backend):
    """The pytfrt ONNX backend (CPU only)."""

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any
                ) -> PytfrtBackendRep:
        """Check and prepare ``model`` (compiled lazily per input signature).

        ``host=`` (a keyword argument): the HostContext or work-queue type string the model
        runs on (as ``pytfrt.compile``'s); default ``pytfrt.model.default_host()``.
        """
        if not cls.supports_device(device):
            raise ValueError(f"pytfrt's ONNX backend runs on CPU only, not {device!r}")
        host = kwargs.pop("host", None)
        super().prepare(model, device, **kwargs)  # onnx.checker
        return PytfrtBackendRep(model, host)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[Any, Any]] | None = None,
                 **kwargs: Any) -> tuple[Any, ...]:
        """Run one node on ``inputs`` (a model of that node alone, typed from the inputs)."""
        if not cls.supports_device(device):
            raise ValueError(f"pytfrt's ONNX backend runs on CPU only, not {device!r}")
        from onnx import helper

        arrays = [np.asarray(x) for x in (inputs.values() if isinstance(inputs, Mapping)
                                          else inputs)]
        names = [n for n in node.input if n]
        ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                             a.shape) for n, a in zip(names, arrays, strict=False)]
        outs = [helper.make_empty_tensor_value_info(n) for n in node.output if n]
        opset = int(kwargs.pop("opset_version", onnx.defs.onnx_opset_version()))
        graph = helper.make_graph([node], "run_node", ins, outs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return cls.prepare(model, device).run(arrays)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return Device(device).type == DeviceType.CPU


prepare = PytfrtBackend.prepare
run_model = PytfrtBackend.run_model
run_node = PytfrtBackend.run_node
supports_device = PytfrtBackend.supports_device
