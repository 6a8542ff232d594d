"""Keras recurrent layers under ``tf.function``: their ``While`` loops become one
``tg.recurrent`` (``pytfrt.compiler.frontends.tf_recurrent``), checked against TensorFlow.

Each model is imported once (``to_graph``): the test asserts how many loops were fused and how
many stay ``tg.while`` (masking keeps its loop: the body reads a second sequence), then runs the
compiled model at batches 1 and 3 (the batch stays dynamic) against Keras at 1e-4 relative.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pytfrt.compiler.api import compile_module, to_graph


def _seq(L: Any, inp: Any) -> Any:
    return L.LSTM(6, return_sequences=True)(inp)


MODELS: dict[str, tuple[Any, int, int]] = {
    # name: (make(L, input) -> outputs, fused loops, loops left)
    "lstm": (lambda L, x: L.LSTM(5)(x), 1, 0),
    "lstm_sequences_stacked": (lambda L, x: L.LSTM(3)(_seq(L, x)), 2, 0),
    "lstm_state_backwards_nobias": (
        lambda L, x: L.LSTM(4, return_sequences=True, return_state=True, go_backwards=True,
                            use_bias=False)(x), 1, 0),
    "lstm_hard_sigmoid_relu": (
        lambda L, x: L.LSTM(4, recurrent_activation="hard_sigmoid", activation="relu")(x),
        1, 0),
    "gru": (lambda L, x: L.GRU(5, return_sequences=True)(x), 1, 0),
    "gru_reset_before": (lambda L, x: L.GRU(5, reset_after=False, return_state=True)(x), 1, 0),
    "simple_rnn_relu": (lambda L, x: L.SimpleRNN(4, activation="relu")(x), 1, 0),
    "bidirectional_gru": (lambda L, x: L.Bidirectional(L.GRU(3, return_sequences=True))(x),
                          2, 0),
    "masked_lstm": (lambda L, x: L.LSTM(4)(L.Masking(0.0)(x)), 0, 1),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_keras_recurrent_layer(tf: Any, assert_matches: Any, name: str) -> None:
    keras = tf.keras
    keras.utils.set_random_seed(sorted(MODELS).index(name))
    make, fused, loops = MODELS[name]
    inp = keras.Input((7, 4))
    model = keras.Model(inp, make(keras.layers, inp))
    gm = to_graph(model)
    text = str(gm)
    assert text.count('"tg.recurrent"') == fused
    main = text[: text.index("func.func", text.index("func.func") + 1)] if loops == 0 else text
    assert main.count('"tg.while"') == loops
    compiled = compile_module(gm)
    for batch in (1, 3):
        x = np.random.default_rng(batch).normal(size=(batch, 7, 4)).astype(np.float32)
        if name == "masked_lstm":
            x[:, 5:] = 0.0  # masked steps at the end
        want = model(x, training=False)
        assert_matches(compiled(x), want)
