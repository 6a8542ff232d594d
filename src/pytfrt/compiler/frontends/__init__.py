"""Model front ends: each translates a source model into the graph dialect (a GraphModule).

``tf`` (TensorFlow functions, Keras models, SavedModels), ``onnx`` (ONNX models) and ``trace``
(``@pytfrt.function``) are imported on demand by :func:`pytfrt.compiler.compile`; each uses
only :class:`pytfrt.compiler.builder.GraphBuilder` to create IR.
"""
