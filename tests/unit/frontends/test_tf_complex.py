"""Complex tensors as pairs of real ones: TF's real FFTs and their gradients, against TF.

``RFFT``/``IRFFT`` of even and odd lengths, with the signal cropped or zero-padded to
``fft_length``, ``ComplexAbs``, complex products and slices (what the ``RFFT`` gradient
builds), compiled and compared with TensorFlow's values and gradients; ``MirrorPad``'s
gradient in both modes; an op pytfrt cannot run on complex values is refused by name.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pytfrt
from pytfrt.compiler.errors import UnsupportedOpError


def _rel(a: Any, b: Any) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


@pytest.mark.parametrize(("n", "fft"), [(16, 16), (9, 9), (12, 16), (7, 7)])
def test_real_ffts_and_their_gradients_match_tf(tf: Any, n: int, fft: int) -> None:
    @tf.function(input_signature=[tf.TensorSpec((None, 3, n), tf.float32)])
    def f(x: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            z = tf.signal.rfft(x, [fft])
            mag = tf.abs(z)
            back = tf.signal.irfft(z * tf.complex(0.5, -2.0), [fft])
            loss = tf.reduce_sum(mag**2) + tf.reduce_sum(tf.math.imag(z)[..., 1:] * 3.0) \
                + tf.reduce_sum(back**2)
        return tf.math.real(z), tf.math.imag(z), mag, back, tape.gradient(loss, x)

    x = np.random.default_rng(n).standard_normal((2, 3, n)).astype(np.float32)
    for got, ref in zip(pytfrt.compile(f)(x), f(x), strict=True):
        assert _rel(got, ref.numpy()) <= 1e-5


def test_a_signal_longer_than_the_fft_is_cropped_as_tf_crops_it(tf: Any) -> None:
    """(TF's own gradient cannot take this case: forward only.)"""

    @tf.function(input_signature=[tf.TensorSpec((None, 20), tf.float32)])
    def f(x: Any) -> Any:
        z = tf.signal.rfft(x, [15])
        return tf.abs(z), tf.signal.irfft(z, [12])

    x = np.random.default_rng(2).standard_normal((3, 20)).astype(np.float32)
    for got, ref in zip(pytfrt.compile(f)(x), f(x), strict=True):
        assert _rel(got, ref.numpy()) <= 1e-5


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
def test_mirror_pad_gradient_matches_tf(tf: Any, mode: str) -> None:
    w = tf.constant(np.random.default_rng(1).standard_normal((2, 9, 11)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec((None, 5, 6), tf.float32)])
    def f(x: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(tf.pad(x, [[0, 0], [2, 2], [4, 1]], mode) * w)
        return tape.gradient(loss, x)

    x = np.zeros((2, 5, 6), np.float32)
    assert _rel(pytfrt.compile(f)(x), f(x).numpy()) <= 1e-6


def test_an_unsupported_op_on_complex_values_is_refused(tf: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((None, 8), tf.float32)])
    def f(x: Any) -> Any:
        return tf.math.real(tf.exp(tf.signal.rfft(x)))

    with pytest.raises(UnsupportedOpError, match="Exp"):
        pytfrt.compile(f)
