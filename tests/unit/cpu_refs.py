"""Reference activations (torch.nn.functional) shared by the CPU kernel tests."""

from __future__ import annotations

from collections.abc import Callable

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
