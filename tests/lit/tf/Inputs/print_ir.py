"""Print the graph dialect the TF front end makes for small tf.functions (for tf/import.test).

Usage: ``python print_ir.py [conv] [control] [state] [error]`` (all by default): for each, a
``// <name>`` line, then the module (or the error). Weights are seeded.
"""

from __future__ import annotations

import os
import sys
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

from pytfrt.compiler.errors import UnsupportedOpError
from pytfrt.compiler.frontends.tf import import_tf

RNG = np.random.default_rng(0)
W = RNG.normal(size=(3, 3, 3, 4)).astype(np.float32)
DW = RNG.normal(size=(3, 3, 4, 2)).astype(np.float32)
B = RNG.normal(size=(8,)).astype(np.float32)
D = RNG.normal(size=(32, 5)).astype(np.float32)


@tf.function(input_signature=[tf.TensorSpec((None, 8, 8, 3), tf.float32)])
def conv(x: Any) -> Any:
    y = tf.nn.conv2d(x, W, strides=2, padding="SAME")
    y = tf.nn.depthwise_conv2d(y, DW, strides=[1, 1, 1, 1], padding="SAME")
    y = tf.nn.relu(tf.nn.bias_add(y, B))
    y = tf.nn.max_pool2d(y, 2, 2, "VALID")
    return tf.matmul(tf.reshape(y, [tf.shape(y)[0], -1]), D)


@tf.function(input_signature=[tf.TensorSpec((None, 3), tf.float32), tf.TensorSpec((), tf.int32)])
def control(x: Any, n: Any) -> Any:
    y = tf.cond(n > 2, lambda: x * 2.0, lambda: x - 1.0)
    return tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 0.5), (0, y))[1]


V = tf.Variable(np.ones((2, 2), np.float32), name="v")


@tf.function(input_signature=[tf.TensorSpec((2, 2), tf.float32)])
def state(g: Any) -> Any:
    V.assign_sub(0.1 * g)
    return V.read_value()


@tf.function(input_signature=[tf.TensorSpec((4,), tf.float32)])
def error(x: Any) -> Any:
    return tf.bitcast(x, tf.int32, name="reinterpret")


if __name__ == "__main__":
    functions = {"conv": conv, "control": control, "state": state, "error": error}
    for which in sys.argv[1:] or list(functions):
        print(f"// {which}")
        try:
            print(import_tf(functions[which]))
        except UnsupportedOpError as exc:
            print(f"error: {exc}")
