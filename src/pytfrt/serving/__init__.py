"""The model server: TensorFlow Serving's REST API over pytfrt (``pytfrt serve``).

Pipeline order of the modules: :mod:`~pytfrt.serving.config` (flags' text-proto files),
:mod:`~pytfrt.serving.signature` and :mod:`~pytfrt.serving.json_codec` (the JSON mapping),
:mod:`~pytfrt.serving.servable` and the backends (``pytfrt_backend``, ``tf_backend``,
``ort_backend``), :mod:`~pytfrt.serving.batching`, :mod:`~pytfrt.serving.model_manager`
(versions, polling, hot swap), :mod:`~pytfrt.serving.bridge` (AsyncValue -> asyncio),
:mod:`~pytfrt.serving.app` (the ASGI app), :mod:`~pytfrt.serving.metrics` and
:mod:`~pytfrt.serving.server` (uvicorn, signals); :mod:`~pytfrt.serving.loadgen` drives a server
(a subprocess and a loopback-only load generator, for ``pytfrt bench serve`` and the tests).
``docs/serving.md`` is the user's guide.

Importing this package imports neither uvicorn, TensorFlow nor ONNX Runtime: each is imported
by the function that needs it.
"""
