"""``tf.einsum`` through pytfrt (one broadcasting ``matmul`` plus transposes and reshapes).

Equations cover batch, contracted, operand-only and summed-away indices, an empty free side on
either operand, and several dynamic dimensions (the leading ``None`` dims of the inputs), also
merged into one group.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pytfrt

EQUATIONS = [
    ("ij,jk->ik", (None, 3), (3, 4)),
    ("abc,cde->abde", (None, None, 6), (6, 2, 3)),
    ("abcd,aecd->acbe", (None, 5, 2, 3), (None, 4, 2, 3)),
    ("acbe,aecd->abcd", (None, 2, 5, 4), (None, 4, 2, 3)),
    ("abcd,cde->abe", (None, 5, 2, 3), (2, 3, 4)),
    # Keras' MultiHeadAttention output weight gradient: the contracted group (a, b) dynamic
    ("abe,abcd->cde", (None, None, 4), (None, None, 2, 3)),
    ("bi,bi->b", (None, 4), (None, 4)),
    ("bij,j->bi", (None, 3, 4), (4,)),
    ("i,bij->bj", (3,), (None, 3, 4)),
    ("bij,bkj->bik", (None, 3, 4), (None, 5, 4)),
    ("bij,kl->bjk", (None, 3, 4), (2, 6)),
    ("bij->bji", (None, 3, 4), None),
    ("bij->bj", (None, 3, 4), None),
]


@pytest.mark.parametrize("equation,sa,sb", EQUATIONS, ids=[e[0] for e in EQUATIONS])
def test_einsum(tf: Any, assert_matches: Any, equation: str, sa: tuple[Any, ...], sb: Any) -> None:
    specs = [tf.TensorSpec(sa, tf.float32)] + ([tf.TensorSpec(sb, tf.float32)] if sb else [])
    f = tf.function(lambda *xs: tf.einsum(equation, *xs), input_signature=specs)
    compiled = pytfrt.compile(f)
    rng = np.random.default_rng(len(equation))
    for batch in (1, 3):
        args = [
            rng.normal(size=[batch if d is None else d for d in s]).astype(np.float32)
            for s in (sa, sb)
            if s
        ]
        assert_matches(compiled(*args), f(*args).numpy())
