"""References shared by the CPU kernel tests: activations (torch.nn.functional), a ReLU
convolution with an optional residual in PyTorch, and a plan's convolution run in each residual
mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F


def activation_refs(alpha: float) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """Activation name -> torch function (``leaky_relu`` with slope ``alpha``)."""
    return {
        "none": lambda t: t,
        "relu": F.relu,
        "relu6": F.relu6,
        "sigmoid": torch.sigmoid,
        "tanh": torch.tanh,
        "silu": F.silu,
        "gelu": F.gelu,
        "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
        "leaky_relu": lambda t: F.leaky_relu(t, alpha),
        "hard_swish": F.hardswish,
    }


def conv_relu_nhwc(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, pad: int,
                   residual: np.ndarray | None) -> np.ndarray:
    """``relu(conv2d(x, w) + b [+ residual])`` in PyTorch for an NHWC ``x`` and an HWIO ``w``
    (symmetric padding ``pad``), NHWC out."""
    y = F.conv2d(torch.from_numpy(x).permute(0, 3, 1, 2),
                 torch.from_numpy(np.ascontiguousarray(w)).permute(3, 2, 0, 1),
                 torch.from_numpy(b), stride=stride, padding=pad).permute(0, 2, 3, 1).numpy()
    return np.maximum(y if residual is None else y + residual, 0)


def conv_in_mode(plan: Any, x: np.ndarray, r: np.ndarray, mode: str) -> np.ndarray:
    """``conv.conv2d(plan, x)`` with the residual ``r`` as the tests' residual ``mode`` says:
    ``"none"``, ``"operand"`` (a third operand) or ``"in place"`` (a copy of ``r`` that is
    also ``out``)."""
    from pytfrt.backends.cpu import conv

    if mode == "none":
        return conv.conv2d(plan, x)
    if mode == "operand":
        return conv.conv2d(plan, x, r)
    out = r.copy()
    return conv.conv2d(plan, x, out, out=out)
