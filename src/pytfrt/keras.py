"""Training a Keras model with pytfrt: :func:`fit` compiles the model's own ``train_step``.

``fit(model, x, y, epochs=..., batch_size=...)`` is the loop users know from
``model.fit``: the model must be compiled by Keras first (``model.compile(optimizer=...,
loss=..., metrics=...)``); pytfrt compiles one ``tf.function`` around ``model.train_step``
(forward pass, loss, gradients, optimizer update and metric updates) with
``pytfrt.compile``, runs it batch by batch in order (no shuffling), shows a progress bar on
stderr (loss, steps/s), and writes every variable the step changed (weights, optimizer slots,
metric state) back to the Keras model at the end. It returns the per-epoch logs, like
``History.history``.

TensorFlow and Keras are imported only when :func:`fit` is called (``import pytfrt`` never
imports them). Not thread-safe: one ``fit`` per model at a time (it mutates the model).
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

import numpy as np

__all__ = ["fit"]


def fit(
    model: Any,
    x: Any,
    y: Any,
    *,
    epochs: int = 1,
    batch_size: int = 32,
    verbose: bool = True,
    stream: TextIO | None = None,
) -> dict[str, list[float]]:
    """Train Keras ``model`` on ``(x, y)`` with its compiled optimizer, loss and metrics.

    Args:
        model: a Keras 3 model on the TensorFlow backend, compiled by Keras
            (``model.compile``); its variables are updated in place when ``fit`` returns.
        x: the inputs: one array (all of it is read into memory).
        y: the targets, one array with as many rows as ``x``.
        epochs: passes over the data.
        batch_size: rows per step; the last batch of an epoch may be smaller.
        verbose: show the progress bar.
        stream: where the bar goes (default stderr).

    Returns:
        ``{"loss": [...], <metric>: [...]}``: each metric at the end of each epoch (Keras'
        running means over the epoch, weighted by batch size, as ``model.fit`` reports).

    Raises:
        ValueError: the model is not compiled by Keras, ``x``/``y`` rows differ, or
            ``epochs``/``batch_size`` are not positive.
        pytfrt.UnsupportedOpError: the train step uses an op pytfrt cannot compile.
    """
    import tensorflow as tf

    import pytfrt

    if getattr(model, "optimizer", None) is None or not getattr(model, "compiled", False):
        raise ValueError(
            "fit needs a Keras model compiled with an optimizer and a loss: call "
            "model.compile(optimizer=..., loss=...) first"
        )
    x = np.asarray(x)
    y = np.asarray(y)
    if x.shape[:1] != y.shape[:1]:
        raise ValueError(f"x has {x.shape[0]} rows but y has {y.shape[0]}")
    if epochs < 1 or batch_size < 1:
        raise ValueError(f"epochs and batch_size must be positive, got {epochs}, {batch_size}")
    if x.dtype == np.float64:
        x = x.astype(np.float32)  # as Keras casts
    model.optimizer.build(model.trainable_variables)
    _build_metrics(model, x[:1], y[:1])
    metric_vars = list(model.metrics_variables)

    @tf.function(
        input_signature=[
            tf.TensorSpec((None, *x.shape[1:]), tf.as_dtype(x.dtype)),
            tf.TensorSpec((None, *y.shape[1:]), tf.as_dtype(y.dtype)),
            tf.TensorSpec((), tf.bool),
        ]
    )
    def step(xb: Any, yb: Any, first: Any) -> Any:
        for v in metric_vars:  # a new epoch starts the metrics' running means again
            v.assign(tf.where(first, tf.zeros_like(v), v))
        return model.train_step((xb, yb))

    started = time.perf_counter()
    try:
        compiled = pytfrt.compile(step)
    except pytfrt.UnsupportedOpError as exc:
        from pytfrt.compiler.frontends.tf import with_keras_layer

        raise with_keras_layer(exc, model, "Keras's own model.fit trains it meanwhile") from exc
    compile_s = time.perf_counter() - started
    steps = math.ceil(len(x) / batch_size)
    history: dict[str, list[float]] = {}
    out = stream if stream is not None else sys.stderr
    bar = _Bar(out, steps, verbose)
    if verbose:
        out.write(f"pytfrt.keras.fit: train step compiled in {compile_s:.1f} s\n")
    for epoch in range(epochs):
        bar.start(epoch, epochs)
        logs: dict[str, Any] = {}
        for i in range(steps):
            rows = slice(i * batch_size, (i + 1) * batch_size)
            logs = compiled(x[rows], y[rows], np.asarray(i == 0))
            bar.update(i + 1, float(np.asarray(logs["loss"])))
        bar.end()
        for name, value in logs.items():
            history.setdefault(name, []).append(float(np.asarray(value)))
    _write_back(model, compiled.variables)
    return history


def _build_metrics(model: Any, x: np.ndarray, y: np.ndarray) -> None:
    """Create the compiled metrics' variables outside the traced step (Keras builds them on
    first use), then zero them."""
    y_pred = model(x, training=False)
    model.compute_metrics(x, y, y_pred, sample_weight=None)
    model.reset_metrics()


def _write_back(model: Any, trained: dict[str, np.ndarray]) -> None:
    """Assign the compiled step's final variable values to the Keras model's variables.

    The compiled model names each variable after its TF variable (``v.value.name`` without
    ``:0``); variables the step never writes are not in ``trained`` and keep their value.
    """
    seen: set[str] = set()
    everything = [*model.variables, *model.optimizer.variables, *model.metrics_variables]
    for v in everything:
        name = v.value.name.rsplit(":", 1)[0] if hasattr(v, "value") else v.name
        if name in seen:
            continue
        seen.add(name)
        if name in trained:
            v.assign(trained[name])


class _Bar:
    """A one-line progress bar (``epoch 1/3 [=====>    ] 12/20 loss 0.4321 85.2 steps/s``);
    redrawn in place on a terminal, printed once per epoch otherwise."""

    WIDTH = 24

    def __init__(self, out: TextIO, steps: int, enabled: bool) -> None:
        self.out = out
        self.steps = steps
        self.enabled = enabled
        self.tty = bool(getattr(out, "isatty", lambda: False)())
        self.line = ""
        self.t0 = 0.0
        self.label = ""

    def start(self, epoch: int, epochs: int) -> None:
        self.label = f"epoch {epoch + 1}/{epochs}"
        self.t0 = time.perf_counter()

    def update(self, done: int, loss: float) -> None:
        rate = done / max(time.perf_counter() - self.t0, 1e-9)
        filled = self.WIDTH * done // self.steps
        arrow = ">" if filled < self.WIDTH else ""
        bar = "=" * filled + arrow + " " * (self.WIDTH - filled - len(arrow))
        self.line = (
            f"{self.label} [{bar}] {done}/{self.steps} loss {loss:.4f} {rate:.1f} steps/s"
        )
        if self.enabled and self.tty:
            self.out.write("\r" + self.line)
            self.out.flush()

    def end(self) -> None:
        if self.enabled:
            self.out.write(("\r" if self.tty else "") + self.line + "\n")
            self.out.flush()
