"""Print the traced program (graph dialect, before the passes) of a gradient through
``pytfrt.cond`` (argument ``cond``), ``pytfrt.switch_case`` (argument ``case``) or
``pytfrt.while_loop`` (argument ``while``)."""

import sys

import numpy as np

import pytfrt
from pytfrt import eager


def through_cond(x, y):
    return pytfrt.cond(eager.reduce_sum(x) > 0,
                       lambda a: eager.reduce_sum(eager.exp(a) * y),
                       lambda a: eager.reduce_sum(eager.tanh(a)), x)


def through_case(x, i):
    return eager.reduce_sum(pytfrt.switch_case(
        i, [lambda a: eager.exp(a), lambda a: a * 3.0, lambda a: eager.tanh(a)], x))


def through_while(x):
    def body(i, a):
        return i + 1, eager.sigmoid(a) * x

    return eager.reduce_sum(pytfrt.while_loop(lambda i, a: i < 3, body, (0, x))[1])


x = np.array([1.0, 2.0], np.float32)
if sys.argv[1] == "cond":
    print(pytfrt.function(pytfrt.grad(through_cond)).get_mlir(x, np.float32(3.0)))
elif sys.argv[1] == "case":
    print(pytfrt.function(pytfrt.grad(through_case)).get_mlir(x, np.int32(1)))
else:
    print(pytfrt.function(pytfrt.grad(through_while)).get_mlir(x))
