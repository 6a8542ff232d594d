"""One small model per public class of ``keras.layers``, for ``test_keras_layers.py``.

:data:`CASES` maps each public class name of ``keras.layers`` (aliases share the case of their
class) to how to build it: a constructor taking the ``keras`` module, the kinds of its inputs
(:data:`INPUTS`), and the model around it. :func:`build` returns the Keras model (float inputs
go through a trainable per-channel :class:`Scale` first, so a train step also checks the
gradient *through* the layer) and :func:`step_function` a ``tf.function`` returning the
inference output (``training=False``) and the loss of one SGD step (``training=True``; the
loss is ``mean(out**2)`` plus the layer's own losses). Classes that are not layers run under
``tf.function`` on their own are in :data:`NOT_LAYERS` with the reason.

Kept apart from the test so the test module stays a list of checks; imported by file path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

# kind -> (shape without the batch, dtype)
INPUTS: dict[str, tuple[tuple[int, ...], str]] = {
    "vec": ((5,), "float32"),
    "seq": ((4, 3), "float32"),
    "img": ((6, 6, 2), "float32"),
    "vol": ((4, 4, 4, 2), "float32"),
    "ids": ((4,), "int32"),
    "str": ((4,), "string"),
    "audio": ((64,), "float32"),
    "frames": ((3, 4, 2), "float32"),
    "frames2d": ((3, 4, 4, 2), "float32"),
    "frames3d": ((2, 3, 3, 3, 1), "float32"),
    "rgb": ((6, 6, 3), "float32"),
}

BATCH = 2


@dataclass(frozen=True)
class Case:
    """How to test one layer class: ``make(keras)`` builds it, applied to inputs ``inputs``
    (a list input when ``as_list``)."""

    make: Callable[[Any], Any]
    inputs: tuple[str, ...]
    as_list: bool = False


def _c(make: Callable[[Any], Any], *inputs: str, as_list: bool = False) -> Case:
    return Case(make, inputs, as_list)


_I01 = {"value_range": (0, 1)}

CASES: dict[str, Case] = {
    "Activation": _c(lambda k: k.layers.Activation("tanh"), "vec"),
    "ActivityRegularization": _c(lambda k: k.layers.ActivityRegularization(l1=0.01), "vec"),
    "AdaptiveAveragePooling1D": _c(lambda k: k.layers.AdaptiveAveragePooling1D(2), "seq"),
    "AdaptiveAveragePooling2D": _c(lambda k: k.layers.AdaptiveAveragePooling2D(2), "img"),
    "AdaptiveAveragePooling3D": _c(lambda k: k.layers.AdaptiveAveragePooling3D(2), "vol"),
    "AdaptiveMaxPooling1D": _c(lambda k: k.layers.AdaptiveMaxPooling1D(2), "seq"),
    "AdaptiveMaxPooling2D": _c(lambda k: k.layers.AdaptiveMaxPooling2D(2), "img"),
    "AdaptiveMaxPooling3D": _c(lambda k: k.layers.AdaptiveMaxPooling3D(2), "vol"),
    "Add": _c(lambda k: k.layers.Add(), "vec", "vec", as_list=True),
    "AdditiveAttention": _c(lambda k: k.layers.AdditiveAttention(), "seq", "seq", as_list=True),
    "AlphaDropout": _c(lambda k: k.layers.AlphaDropout(0.3, seed=1), "vec"),
    "Attention": _c(lambda k: k.layers.Attention(), "seq", "seq", as_list=True),
    # two chains of depth one: the same ops (gamma-sampled mixing weights, the augmentations)
    # in a third of the graph the defaults make
    "AugMix": _c(lambda k: k.layers.AugMix(**_I01, num_chains=2, chain_depth=1, seed=1), "rgb"),
    "AutoContrast": _c(lambda k: k.layers.AutoContrast(**_I01), "rgb"),
    "Average": _c(lambda k: k.layers.Average(), "vec", "vec", as_list=True),
    "AveragePooling1D": _c(lambda k: k.layers.AveragePooling1D(2), "seq"),
    "AveragePooling2D": _c(lambda k: k.layers.AveragePooling2D(2), "img"),
    "AveragePooling3D": _c(lambda k: k.layers.AveragePooling3D(2), "vol"),
    "BatchNormalization": _c(lambda k: k.layers.BatchNormalization(), "img"),
    "Bidirectional": _c(lambda k: k.layers.Bidirectional(k.layers.LSTM(3)), "seq"),
    "CategoryEncoding": _c(
        lambda k: k.layers.CategoryEncoding(num_tokens=10, output_mode="multi_hot"), "ids"
    ),
    "CenterCrop": _c(lambda k: k.layers.CenterCrop(4, 4), "img"),
    "Concatenate": _c(lambda k: k.layers.Concatenate(), "vec", "vec", as_list=True),
    "ContrastLimitedAdaptiveHistogramEqualization": _c(
        lambda k: k.layers.ContrastLimitedAdaptiveHistogramEqualization(
            **_I01, tile_grid_size=(2, 2)
        ),
        "rgb",
    ),
    "Conv1D": _c(lambda k: k.layers.Conv1D(3, 2), "seq"),
    "Conv1DTranspose": _c(lambda k: k.layers.Conv1DTranspose(3, 2), "seq"),
    "Conv2D": _c(lambda k: k.layers.Conv2D(3, 2), "img"),
    "Conv2DTranspose": _c(lambda k: k.layers.Conv2DTranspose(3, 2), "img"),
    "Conv3D": _c(lambda k: k.layers.Conv3D(3, 2), "vol"),
    "Conv3DTranspose": _c(lambda k: k.layers.Conv3DTranspose(3, 2), "vol"),
    "ConvLSTM1D": _c(lambda k: k.layers.ConvLSTM1D(2, 2), "frames"),
    "ConvLSTM2D": _c(lambda k: k.layers.ConvLSTM2D(2, 2), "frames2d"),
    "ConvLSTM3D": _c(lambda k: k.layers.ConvLSTM3D(2, 2), "frames3d"),
    "Cropping1D": _c(lambda k: k.layers.Cropping1D(1), "seq"),
    "Cropping2D": _c(lambda k: k.layers.Cropping2D(1), "img"),
    "Cropping3D": _c(lambda k: k.layers.Cropping3D(1), "vol"),
    # seed 2: the batch's shuffle is not the identity (seed 1 would mix each image with
    # itself, and the sampled mixing weights would not show in the loss)
    "CutMix": _c(lambda k: k.layers.CutMix(seed=2), "rgb"),
    "Dense": _c(lambda k: k.layers.Dense(3), "vec"),
    "DepthwiseConv1D": _c(lambda k: k.layers.DepthwiseConv1D(2), "seq"),
    "DepthwiseConv2D": _c(lambda k: k.layers.DepthwiseConv2D(2), "img"),
    "Discretization": _c(lambda k: k.layers.Discretization(bin_boundaries=[-0.5, 0, 0.5]), "vec"),
    "Dot": _c(lambda k: k.layers.Dot(axes=1), "vec", "vec", as_list=True),
    "Dropout": _c(lambda k: k.layers.Dropout(0.3, seed=1), "vec"),
    "ELU": _c(lambda k: k.layers.ELU(), "vec"),
    "EinsumDense": _c(lambda k: k.layers.EinsumDense("ab,bc->ac", output_shape=3), "vec"),
    "Embedding": _c(lambda k: k.layers.Embedding(10, 3), "ids"),
    "Equalization": _c(lambda k: k.layers.Equalization(**_I01), "rgb"),
    "Flatten": _c(lambda k: k.layers.Flatten(), "img"),
    "GRU": _c(lambda k: k.layers.GRU(3), "seq"),
    "GRUCell": _c(lambda k: k.layers.RNN(k.layers.GRUCell(3)), "seq"),
    "GaussianDropout": _c(lambda k: k.layers.GaussianDropout(0.2, seed=1), "vec"),
    "GaussianNoise": _c(lambda k: k.layers.GaussianNoise(0.1, seed=1), "vec"),
    "GlobalAveragePooling1D": _c(lambda k: k.layers.GlobalAveragePooling1D(), "seq"),
    "GlobalAveragePooling2D": _c(lambda k: k.layers.GlobalAveragePooling2D(), "img"),
    "GlobalAveragePooling3D": _c(lambda k: k.layers.GlobalAveragePooling3D(), "vol"),
    "GlobalMaxPooling1D": _c(lambda k: k.layers.GlobalMaxPooling1D(), "seq"),
    "GlobalMaxPooling2D": _c(lambda k: k.layers.GlobalMaxPooling2D(), "img"),
    "GlobalMaxPooling3D": _c(lambda k: k.layers.GlobalMaxPooling3D(), "vol"),
    "GroupNormalization": _c(lambda k: k.layers.GroupNormalization(groups=2), "img"),
    "GroupQueryAttention": _c(lambda k: _Attend(k.layers.GroupQueryAttention(2, 2, 1)), "seq"),
    "HashedCrossing": _c(lambda k: k.layers.HashedCrossing(5), "id1", "id1", as_list=True),
    "Hashing": _c(lambda k: k.layers.Hashing(5), "ids"),
    "Identity": _c(lambda k: k.layers.Identity(), "vec"),
    "IntegerLookup": _c(lambda k: k.layers.IntegerLookup(vocabulary=[1, 2, 3]), "ids"),
    "LSTM": _c(lambda k: k.layers.LSTM(3), "seq"),
    "LSTMCell": _c(lambda k: k.layers.RNN(k.layers.LSTMCell(3)), "seq"),
    "Lambda": _c(lambda k: k.layers.Lambda(lambda x: x * 2.0 + 1.0), "vec"),
    "LayerNormalization": _c(lambda k: k.layers.LayerNormalization(), "vec"),
    "LeakyReLU": _c(lambda k: k.layers.LeakyReLU(), "vec"),
    "Masking": _c(lambda k: k.layers.Masking(0.0), "seq"),
    "MaxPooling1D": _c(lambda k: k.layers.MaxPooling1D(2), "seq"),
    "MaxPooling2D": _c(lambda k: k.layers.MaxPooling2D(2), "img"),
    "MaxPooling3D": _c(lambda k: k.layers.MaxPooling3D(2), "vol"),
    "Maximum": _c(lambda k: k.layers.Maximum(), "vec", "vec", as_list=True),
    "MelSpectrogram": _c(
        lambda k: k.layers.MelSpectrogram(
            fft_length=16, sequence_stride=8, num_mel_bins=4, sampling_rate=8000
        ),
        "audio",
    ),
    "Minimum": _c(lambda k: k.layers.Minimum(), "vec", "vec", as_list=True),
    "MixUp": _c(lambda k: k.layers.MixUp(seed=2), "rgb"),  # seed 2: see CutMix
    "MultiHeadAttention": _c(lambda k: _Attend(k.layers.MultiHeadAttention(2, 2)), "seq"),
    "Multiply": _c(lambda k: k.layers.Multiply(), "vec", "vec", as_list=True),
    "Normalization": _c(lambda k: _built(k.layers.Normalization(mean=0.5, variance=2.0)), "vec"),
    "PReLU": _c(lambda k: k.layers.PReLU(), "vec"),
    "Permute": _c(lambda k: k.layers.Permute((2, 1)), "seq"),
    "Pipeline": _c(
        lambda k: k.layers.Pipeline([k.layers.Rescaling(2.0), k.layers.CenterCrop(4, 4)]), "img"
    ),
    "RMSNormalization": _c(lambda k: k.layers.RMSNormalization(), "vec"),
    "RNN": _c(lambda k: k.layers.RNN(k.layers.SimpleRNNCell(3)), "seq"),
    "RandAugment": _c(lambda k: k.layers.RandAugment(**_I01, seed=1), "rgb"),
    "RandomBrightness": _c(lambda k: k.layers.RandomBrightness(0.2, **_I01, seed=1), "rgb"),
    "RandomColorDegeneration": _c(
        lambda k: k.layers.RandomColorDegeneration(0.5, **_I01, seed=1), "rgb"
    ),
    "RandomColorJitter": _c(
        lambda k: k.layers.RandomColorJitter(**_I01, brightness_factor=0.2, seed=1), "rgb"
    ),
    "RandomContrast": _c(lambda k: k.layers.RandomContrast(0.5, **_I01, seed=1), "rgb"),
    "RandomCrop": _c(lambda k: k.layers.RandomCrop(4, 4, seed=1), "img"),
    "RandomElasticTransform": _c(lambda k: k.layers.RandomElasticTransform(**_I01, seed=1), "rgb"),
    "RandomErasing": _c(lambda k: k.layers.RandomErasing(**_I01, seed=1), "rgb"),
    "RandomFlip": _c(lambda k: k.layers.RandomFlip(seed=1), "img"),
    "RandomGaussianBlur": _c(lambda k: k.layers.RandomGaussianBlur(**_I01, seed=1), "rgb"),
    "RandomGrayscale": _c(lambda k: k.layers.RandomGrayscale(seed=1), "rgb"),
    "RandomHue": _c(lambda k: k.layers.RandomHue(0.5, **_I01, seed=1), "rgb"),
    "RandomInvert": _c(lambda k: k.layers.RandomInvert(**_I01, seed=1), "rgb"),
    "RandomPerspective": _c(lambda k: k.layers.RandomPerspective(seed=1), "rgb"),
    "RandomPosterization": _c(
        lambda k: k.layers.RandomPosterization(4, value_range=(0, 255), seed=1), "rgb"
    ),
    "RandomRotation": _c(lambda k: k.layers.RandomRotation(0.2, seed=1), "img"),
    "RandomSaturation": _c(lambda k: k.layers.RandomSaturation(0.5, **_I01, seed=1), "rgb"),
    "RandomSharpness": _c(lambda k: k.layers.RandomSharpness(0.5, **_I01, seed=1), "rgb"),
    "RandomShear": _c(lambda k: k.layers.RandomShear(0.2, 0.2, seed=1), "img"),
    "RandomTranslation": _c(lambda k: k.layers.RandomTranslation(0.2, 0.2, seed=1), "img"),
    "RandomZoom": _c(lambda k: k.layers.RandomZoom(0.2, seed=1), "img"),
    "ReLU": _c(lambda k: k.layers.ReLU(), "vec"),
    "RepeatVector": _c(lambda k: k.layers.RepeatVector(3), "vec"),
    "Rescaling": _c(lambda k: k.layers.Rescaling(2.0, offset=-1.0), "vec"),
    "Reshape": _c(lambda k: k.layers.Reshape((3, 4)), "seq"),
    "Resizing": _c(lambda k: k.layers.Resizing(4, 3), "img"),
    "ReversibleEmbedding": _c(lambda k: k.layers.ReversibleEmbedding(10, 3), "ids"),
    "STFTSpectrogram": _c(
        lambda k: k.layers.STFTSpectrogram(frame_length=16, frame_step=8, fft_length=16),
        "audio1",
    ),
    "SeparableConv1D": _c(lambda k: k.layers.SeparableConv1D(3, 2), "seq"),
    "SeparableConv2D": _c(lambda k: k.layers.SeparableConv2D(3, 2), "img"),
    "SimpleRNN": _c(lambda k: k.layers.SimpleRNN(3), "seq"),
    "SimpleRNNCell": _c(lambda k: k.layers.RNN(k.layers.SimpleRNNCell(3)), "seq"),
    "Softmax": _c(lambda k: k.layers.Softmax(), "vec"),
    "Solarization": _c(lambda k: k.layers.Solarization(0.2, 0.2, **_I01, seed=1), "rgb"),
    "SpatialDropout1D": _c(lambda k: k.layers.SpatialDropout1D(0.3, seed=1), "seq"),
    "SpatialDropout2D": _c(lambda k: k.layers.SpatialDropout2D(0.3, seed=1), "img"),
    "SpatialDropout3D": _c(lambda k: k.layers.SpatialDropout3D(0.3, seed=1), "vol"),
    "SpectralNormalization": _c(lambda k: k.layers.SpectralNormalization(k.layers.Dense(3)), "vec"),
    "StackedRNNCells": _c(
        lambda k: k.layers.RNN(
            k.layers.StackedRNNCells([k.layers.SimpleRNNCell(3), k.layers.SimpleRNNCell(2)])
        ),
        "seq",
    ),
    "StringLookup": _c(lambda k: k.layers.StringLookup(vocabulary=["a", "b", "c"]), "str"),
    "Subtract": _c(lambda k: k.layers.Subtract(), "vec", "vec", as_list=True),
    "TextVectorization": _c(
        lambda k: k.layers.TextVectorization(vocabulary=["a", "b", "c"], output_sequence_length=3),
        "text",
    ),
    "TimeDistributed": _c(lambda k: k.layers.TimeDistributed(k.layers.Dense(2)), "seq"),
    "UnitNormalization": _c(lambda k: k.layers.UnitNormalization(), "vec"),
    "UpSampling1D": _c(lambda k: k.layers.UpSampling1D(2), "seq"),
    "UpSampling2D": _c(lambda k: k.layers.UpSampling2D(2), "img"),
    "UpSampling3D": _c(lambda k: k.layers.UpSampling3D(2), "vol"),
    "ZeroPadding1D": _c(lambda k: k.layers.ZeroPadding1D(1), "seq"),
    "ZeroPadding2D": _c(lambda k: k.layers.ZeroPadding2D(1), "img"),
    "ZeroPadding3D": _c(lambda k: k.layers.ZeroPadding3D(1), "vol"),
}

INPUTS["audio1"] = ((64, 1), "float32")
INPUTS["id1"] = ((1,), "int32")
INPUTS["text"] = ((1,), "string")

NOT_LAYERS: dict[str, str] = {
    "InputSpec": "not a layer (a shape/dtype specification)",
    "InputLayer": "not a computation (the model's input placeholder)",
    "Layer": "the abstract base class",
    "Wrapper": "an abstract base class (its subclasses Bidirectional, TimeDistributed are tested)",
    "FlaxLayer": "wraps a Flax module: runs on the JAX backend, not under tf.function",
    "JaxLayer": "wraps a JAX function: runs on the JAX backend, not under tf.function",
    "TorchModuleWrapper": "wraps a torch module: runs on the torch backend, not under tf.function",
    "TFSMLayer": "loads a TF SavedModel's endpoint (compile the SavedModel itself instead)",
    "MaxNumBoundingBoxes": "transforms bounding-box dicts only (images pass through unchanged)",
}


def _built(layer: Any) -> Any:
    """``layer`` built eagerly for a ``vec`` input (Normalization makes its constants then)."""
    layer.build((None, *INPUTS["vec"][0]))
    return layer


class _Attend:
    """Self-attention ``layer(x, x)`` (MultiHeadAttention takes query and value positionally)."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer

    def __call__(self, x: Any, training: bool = False) -> Any:
        return self.layer(x, x, training=training)


def layer_names(keras: Any) -> dict[str, list[str]]:
    """Each public class of ``keras.layers`` by its canonical name -> all its public names."""
    import inspect

    by_class: dict[Any, list[str]] = {}
    for name in sorted(dir(keras.layers)):
        obj = getattr(keras.layers, name)
        if not name.startswith("_") and inspect.isclass(obj):
            by_class.setdefault(obj, []).append(name)
    out: dict[str, list[str]] = {}
    for cls, names in by_class.items():
        canonical = cls.__name__ if cls.__name__ in names else names[0]
        out[canonical] = names
    return out


def sample(kind: str, seed: int) -> np.ndarray:
    """A batch of input ``kind``: floats in [0, 1), ids in [0, 10), strings from a small set."""
    shape, dtype = INPUTS[kind]
    rng = np.random.default_rng(seed)
    full = (BATCH, *shape)
    if dtype == "int32":
        return rng.integers(0, 10, full).astype(np.int32)
    if kind == "text":
        return rng.choice(np.array([b"a b", b"c a zz", b"b"], dtype=object), full)
    if dtype == "string":
        return rng.choice(np.array([b"a", b"b", b"c", b"zz"], dtype=object), full)
    return rng.uniform(0, 1, full).astype(np.float32)


def build(keras: Any, name: str, case: Case) -> Any:
    """The model: inputs -> (float inputs: a trainable per-channel Scale) -> the layer.

    A subclassed model (some preprocessing layers cannot be traced into a functional one),
    built by one call on a sample batch; ``model.case_dtype`` is its output's dtype."""
    keras.utils.set_random_seed(7)
    scales = [_scale(keras) if INPUTS[k][1] == "float32" else None for k in case.inputs]
    layer = case.make(keras)

    class CaseModel(keras.Model):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__(name=f"case_{name}")
            self.scales = [s for s in scales if s is not None]
            self.layer = layer

        def call(self, inputs: Any, training: bool = False) -> Any:
            xs = list(inputs) if isinstance(inputs, list | tuple) else [inputs]
            xs = [x if s is None else s(x) for x, s in zip(xs, scales, strict=True)]
            if case.as_list:
                return self.layer(xs, training=training)
            return _call(self.layer, xs, training)

    model = CaseModel()
    feed = [sample(k, i) for i, k in enumerate(case.inputs)]
    out = model(feed if len(feed) > 1 else feed[0])
    model.case_dtype = str(np.asarray(out).dtype) if out.dtype != "string" else "string"
    return model


def _call(layer: Any, xs: list[Any], training: bool) -> Any:
    try:
        return layer(*xs, training=training)
    except TypeError:  # a callable without a training argument
        return layer(*xs)


def _scale(keras: Any) -> Any:
    class Scale(keras.layers.Layer):  # type: ignore[misc,name-defined]
        def build(self, shape: Any) -> None:
            self.w = self.add_weight(
                shape=(shape[-1],),
                initializer=keras.initializers.RandomUniform(0.5, 1.5, seed=3),
            )

        def call(self, x: Any) -> Any:
            return x * self.w

    return Scale()


def step_function(tf: Any, keras: Any, model: Any, case: Case) -> tuple[Any, Any, bool]:
    """``(step, optimizer, trains)``: ``step(*inputs) -> (inference output, loss)``, one SGD
    step on the loss; ``trains`` is False (and the step only infers) when the output is not
    floating point."""
    specs = [tf.TensorSpec((None, *INPUTS[k][0]), INPUTS[k][1]) for k in case.inputs]
    trains = model.case_dtype.startswith("float")
    optimizer = keras.optimizers.SGD(0.1)
    if trains:
        optimizer.build(model.trainable_variables)

    @tf.function(input_signature=specs)
    def step(*xs: Any) -> Any:
        feed = list(xs) if len(xs) > 1 else xs[0]
        infer = model(feed, training=False)
        if not trains:
            return infer
        with tf.GradientTape() as tape:
            out = model(feed, training=True)
            loss = tf.reduce_mean(tf.square(out))
            if model.losses:
                loss += tf.add_n(model.losses)
        variables = model.trainable_variables
        grads = tape.gradient(loss, variables)
        pairs = [(g, v) for g, v in zip(grads, variables, strict=True) if g is not None]
        if pairs:
            optimizer.apply_gradients(pairs)
        return infer, loss

    return step, optimizer, trains
