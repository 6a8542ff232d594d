"""Keras models for the TensorFlow front end's tests and benchmarks (seeded, random weights).

Every builder sets Keras' seed, so the same call gives the same weights. Batch-norm moving
statistics are randomised (:func:`randomize_batch_norm`) so inference really exercises them.
The benchmark ``benchmarks/models.py`` and ``benchmarks/tf_compile.py`` import this module by
file path; the tests in ``tests/unit/frontends/`` do too (through their ``conftest.py``).

Models: :func:`mlp` (784-512-512-10 by default), :func:`cnn` (Conv2D, BatchNorm, MaxPool,
Dropout, Dense), :func:`residual_cnn` (a residual block and GlobalAveragePooling2D),
:func:`bottleneck_cnn` (ResNet-50's layer types at a small size), :func:`transformer_block`
(Embedding, MultiHeadAttention, LayerNorm, GELU), :func:`two_io` (two inputs, two outputs),
:func:`resnet50`, :func:`mobilenet_v2`, :func:`mobilenet_v3_small`, :func:`efficientnet_b0`
(``keras.applications``, ``weights=None``, logits out),
and :func:`train_step` (a
``tf.function`` with ``GradientTape`` and an optimizer update).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np


def _keras() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow  # noqa: F401  (Keras' backend)

    return keras


def randomize_batch_norm(model: Any, seed: int = 0) -> Any:
    """Give every BatchNormalization layer random gamma/beta and moving statistics."""
    keras = _keras()
    rng = np.random.default_rng(seed)
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.BatchNormalization):
            n = layer.moving_mean.shape[0]
            layer.moving_mean.assign(rng.normal(0, 0.5, n).astype(np.float32))
            layer.moving_variance.assign(rng.uniform(0.5, 1.5, n).astype(np.float32))
            if layer.gamma is not None:
                layer.gamma.assign(rng.uniform(0.5, 1.5, n).astype(np.float32))
            if layer.beta is not None:
                layer.beta.assign(rng.normal(0, 0.2, n).astype(np.float32))
    return model


def mlp(
    inputs: int = 784, hidden: Sequence[int] = (512, 512), classes: int = 10, seed: int = 0
) -> Any:
    """A ReLU MLP ``inputs -> hidden... -> classes`` (logits)."""
    keras = _keras()
    keras.utils.set_random_seed(seed)
    layers = [keras.Input((inputs,), name="x")]
    layers += [keras.layers.Dense(h, activation="relu") for h in hidden]
    layers.append(keras.layers.Dense(classes))
    return keras.Sequential(layers, name="mlp")


def cnn(
    size: int = 28, channels: int = 1, classes: int = 10, dropout: float = 0.25, seed: int = 0
) -> Any:
    """Conv2D -> BatchNorm -> ReLU -> MaxPool -> Conv2D (valid) -> MaxPool -> Dropout -> Dense."""
    keras = _keras()
    keras.utils.set_random_seed(seed)
    L = keras.layers
    model = keras.Sequential(
        [
            keras.Input((size, size, channels), name="image"),
            L.Conv2D(8, 3, padding="same"),
            L.BatchNormalization(),
            L.ReLU(),
            L.MaxPool2D(),
            L.Conv2D(16, 3, strides=2, padding="valid", activation="relu"),
            L.MaxPool2D(padding="same"),
            L.Dropout(dropout),
            L.Flatten(),
            L.Dense(classes),
        ],
        name="cnn",
    )
    return randomize_batch_norm(model, seed)


def residual_cnn(
    size: int = 32, channels: int = 3, width: int = 16, classes: int = 10, seed: int = 0
) -> Any:
    """Conv2D+BatchNorm+ReLU stem, one residual block (two Conv2D+BatchNorm, an Add, ReLU),
    GlobalAveragePooling2D, Dense (logits): the small CNN of the training benchmarks."""
    keras = _keras()
    keras.utils.set_random_seed(seed)
    L = keras.layers

    def conv_bn(x: Any) -> Any:
        return L.BatchNormalization()(L.Conv2D(width, 3, padding="same", use_bias=False)(x))

    image = keras.Input((size, size, channels), name="image")
    x = L.ReLU()(conv_bn(image))
    y = conv_bn(L.ReLU()(conv_bn(x)))
    x = L.ReLU()(L.Add()([x, y]))
    out = L.Dense(classes)(L.GlobalAveragePooling2D()(x))
    return randomize_batch_norm(keras.Model(image, out, name="residual_cnn"), seed)


def bottleneck_cnn(
    size: int = 16, channels: int = 3, width: int = 4, classes: int = 10, seed: int = 0
) -> Any:
    """ResNet-50's layer types at a small size: the 7x7/2 stem (ZeroPadding2D, Conv2D with bias,
    BatchNormalization with ResNet's epsilon 1.001e-5, ReLU, ZeroPadding2D + MaxPool 3x3/2), a
    bottleneck block with a projection shortcut and one with stride 2 (1x1, 3x3, 1x1 Conv2D with
    bias + BatchNorm, Add, ReLU), GlobalAveragePooling2D, Dense (logits)."""
    keras = _keras()
    keras.utils.set_random_seed(seed)
    L = keras.layers

    def conv_bn(x: Any, filters: int, kernel: int, strides: int = 1) -> Any:
        x = L.Conv2D(filters, kernel, strides=strides, padding="same")(x)
        return L.BatchNormalization(epsilon=1.001e-5)(x)

    def block(x: Any, strides: int) -> Any:
        shortcut = conv_bn(x, 4 * width, 1, strides)
        y = L.ReLU()(conv_bn(x, width, 1, strides))
        y = L.ReLU()(conv_bn(y, width, 3))
        return L.ReLU()(L.Add()([shortcut, conv_bn(y, 4 * width, 1)]))

    image = keras.Input((size, size, channels), name="image")
    x = L.ZeroPadding2D(3)(image)
    x = L.BatchNormalization(epsilon=1.001e-5)(L.Conv2D(2 * width, 7, strides=2)(x))
    x = L.MaxPooling2D(3, strides=2)(L.ZeroPadding2D(1)(L.ReLU()(x)))
    x = block(block(x, 1), 2)
    out = L.Dense(classes)(L.GlobalAveragePooling2D()(x))
    return randomize_batch_norm(keras.Model(image, out, name="bottleneck_cnn"), seed)


def transformer_block(
    vocab: int = 100, seq: int | None = 16, dim: int = 32, heads: int = 4, seed: int = 0
) -> Any:
    """Embedding + one post-norm Transformer encoder block (MHA, LayerNorm, GELU MLP).

    ``seq=None`` makes the sequence length dynamic too."""
    keras = _keras()
    keras.utils.set_random_seed(seed)
    L = keras.layers
    ids = keras.Input((seq,), dtype="int32", name="ids")
    x = L.Embedding(vocab, dim)(ids)
    a = L.MultiHeadAttention(heads, dim // heads)(x, x)
    h = L.LayerNormalization(epsilon=1e-5)(x + a)
    f = L.Dense(dim * 2, activation="gelu")(h)
    f = L.Dense(dim)(f)
    out = L.LayerNormalization(epsilon=1e-5)(h + f)
    return keras.Model(ids, out, name="transformer_block")


def two_io(seed: int = 0) -> Any:
    """Inputs ``a[?, 8]``, ``b[?, 4]``; outputs ``[scores[?, 3], gate[?, 2]]``."""
    keras = _keras()
    keras.utils.set_random_seed(seed)
    L = keras.layers
    a = keras.Input((8,), name="a")
    b = keras.Input((4,), name="b")
    h = L.Concatenate()([L.Dense(6, activation="tanh")(a), b])
    scores = L.Dense(3, name="scores")(h)
    gate = L.Dense(2, activation="sigmoid", name="gate")(h)
    return keras.Model([a, b], [scores, gate], name="two_io")


def _application(name: str, size: int, seed: int) -> Any:
    keras = _keras()
    keras.utils.set_random_seed(seed)
    build = getattr(keras.applications, name)
    model = build(weights=None, input_shape=(size, size, 3), classifier_activation=None)
    return randomize_batch_norm(model, seed)


def resnet50(size: int = 224, seed: int = 0) -> Any:
    """``keras.applications.ResNet50(weights=None)`` with logits out (no softmax)."""
    return _application("ResNet50", size, seed)


def mobilenet_v2(size: int = 224, seed: int = 0) -> Any:
    """``keras.applications.MobileNetV2(weights=None)`` with logits out (no softmax)."""
    return _application("MobileNetV2", size, seed)


def mobilenet_v3_small(size: int = 224, seed: int = 0) -> Any:
    """``keras.applications.MobileNetV3Small(weights=None)`` with logits out (no softmax)."""
    return _application("MobileNetV3Small", size, seed)


def efficientnet_b0(size: int = 224, seed: int = 0) -> Any:
    """``keras.applications.EfficientNetB0(weights=None)`` with logits out (no softmax)."""
    return _application("EfficientNetB0", size, seed)


def train_step(model: Any, optimizer: Any, loss: Any, label_spec: Any,
               jit_compile: bool = False) -> Any:
    """A ``tf.function(x, y) -> loss`` taking one optimizer step on ``model``.

    The optimizer is built on the model's trainable variables first (so no variable is
    created while tracing). ``label_spec`` is the ``tf.TensorSpec`` of the labels;
    ``jit_compile`` has TF compile the step with XLA.
    """
    _keras()
    import tensorflow as tf

    optimizer.build(model.trainable_variables)
    x_spec = tf.TensorSpec(model.inputs[0].shape, model.inputs[0].dtype)

    @tf.function(input_signature=[x_spec, label_spec], jit_compile=jit_compile)
    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            value = loss(y, model(x, training=True))
        grads = tape.gradient(value, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return value

    return step
