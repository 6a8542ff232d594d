"""Every op of the catalogue is accounted for by pytfrt.grad, and every gradient rule is checked.

:func:`test_every_catalogue_op_is_classified` enumerates ``pytfrt.compiler.ops.CATALOGUE``: each
op must have a rule checked against JAX and float64 finite differences (here, in
``test_autodiff.py``, ``test_autodiff_more_rules.py``, ``test_autodiff_control.py`` or
``test_autodiff_case.py``), or carry no gradient (``NON_DIFFERENTIABLE``), or be a deliberate
exception with its reason
(``pytfrt.compiler.autodiff.NO_RULE``); it fails naming any other op.  The rules added beyond
``test_autodiff.py``'s lists are checked here with the same oracle (``test_autodiff._check``).
"""

from __future__ import annotations

import numpy as np
import pytest
import test_autodiff as base  # the rule lists and the JAX + finite-difference check
import test_autodiff_more_rules as more  # indexing, scattering, einsum, resize, ... rules
from test_autodiff import _any, _away_from_zero, _check, _pos, _tg

import pytfrt
from pytfrt import eager
from pytfrt.compiler.autodiff import (
    MULTI_VJP_RULES,
    NO_RULE,
    NON_DIFFERENTIABLE,
    VJP_RULES,
    AutodiffError,
)
from pytfrt.compiler.autodiff_control import CONTROL_RULES
from pytfrt.compiler.frontends import trace
from pytfrt.compiler.ops import CATALOGUE

jax = pytest.importorskip("jax")
jnp = jax.numpy

RNG = np.random.default_rng(4)


def _small(*shape: int) -> np.ndarray:
    return RNG.uniform(-1.2, 1.2, shape).astype(np.float32)


def _off_kinks(*shape: int) -> np.ndarray:
    """Values in (-4, 4) away from hard_swish's kinks at -3 and 3."""
    x = RNG.uniform(-4.0, 4.0, shape)
    return np.where(np.abs(np.abs(x) - 3.0) < 0.2, 1.0, x).astype(np.float32)


def _emit(op: str, n: int, **attrs: object):  # an op with n results, traced directly
    return lambda *xs: trace.tracer_for(*xs).emit(op, list(xs), n_results=n, **attrs)


def _d2s_jax(x, b):  # TF's DepthToSpace (DCR), NHWC
    n, h, w, c = x.shape
    y = x.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5)
    return y.reshape(n, h * b, w * b, c // (b * b))


def _s2d_jax(x, b):
    n, h, w, c = x.shape
    y = x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
    return y.reshape(n, h // b, w // b, b * b * c)


def _cumsum_jax(x, axis, exclusive, reverse):
    y = jnp.flip(x, axis) if reverse else x
    c = jnp.cumsum(y, axis)
    if exclusive:
        c = c - y
    return jnp.flip(c, axis) if reverse else c


# (name, pytfrt function, jax function, inputs, argnums)
RULES = [
    ("tan", _tg("tan"), jnp.tan, [_small(3, 4)], (0,)),
    ("softsign", _tg("softsign"), jax.nn.soft_sign, [_any(3, 4)], (0,)),
    ("leaky_relu", _tg("leaky_relu", alpha=0.2), lambda x: jax.nn.leaky_relu(x, 0.2),
     [_away_from_zero(3, 4)], (0,)),
    ("elu", _tg("elu"), jax.nn.elu, [_away_from_zero(3, 4)], (0,)),
    ("selu", _tg("selu"), jax.nn.selu, [_away_from_zero(3, 4)], (0,)),
    ("hard_sigmoid", _tg("hard_sigmoid", alpha=0.3, beta=0.5),
     lambda x: jnp.clip(0.3 * x + 0.5, 0.0, 1.0), [_off_kinks(3, 4)], (0,)),
    ("hard_swish", _tg("hard_swish"), jax.nn.hard_swish, [_off_kinks(3, 4)], (0,)),
    ("atan2", _tg("atan2"), jnp.arctan2, [_away_from_zero(3, 4), _away_from_zero(3, 4)],
     (0, 1)),
    ("tanh_grad", _tg("tanh_grad"), lambda y, dy: dy * (1 - y * y), [_small(3, 4), _any(3, 4)],
     (0, 1)),
    ("sigmoid_grad", _tg("sigmoid_grad"), lambda y, dy: dy * y * (1 - y),
     [_small(3, 4), _any(3, 4)], (0, 1)),
    ("relu_grad", _tg("relu_grad"), lambda dy, x: jnp.where(x > 0, dy, 0.0),
     [_any(3, 4), _away_from_zero(3, 4)], (0, 1)),
    ("relu6_grad", _tg("relu6_grad"), lambda dy, x: jnp.where((x > 0) & (x < 6), dy, 0.0),
     [_any(3, 4), _away_from_zero(3, 4) * 4], (0, 1)),
    ("pad", _tg("pad", pads=[1, 0, 2, 1], mode="constant", value=0.5),
     lambda x: jnp.pad(x, ((1, 2), (0, 1)), constant_values=0.5), [_any(3, 4)], (0,)),
    ("tile", _tg("tile", multiples=[2, 3]), lambda x: jnp.tile(x, (2, 3)), [_any(3, 4)], (0,)),
    ("trilu", _tg("trilu", upper=True, k=1), lambda x: jnp.triu(x, 1), [_any(3, 4)], (0,)),
    ("depth_to_space", _tg("depth_to_space", block_size=2, layout="NHWC"),
     lambda x: _d2s_jax(x, 2), [_any(1, 2, 3, 8)], (0,)),
    ("space_to_depth", _tg("space_to_depth", block_size=2, layout="NHWC"),
     lambda x: _s2d_jax(x, 2), [_any(1, 4, 2, 3)], (0,)),
    ("fill", lambda v: _tg("fill")(np.asarray([2, 3], np.int64), v),
     lambda v: jnp.full((2, 3), v), [np.float32(0.7)], (0,)),
    ("global_avg_pool", _tg("global_avg_pool", layout="NHWC"),
     lambda x: jnp.mean(x, axis=(1, 2), keepdims=True), [_any(2, 3, 4, 2)], (0,)),
    ("global_max_pool", _tg("global_max_pool", layout="NCHW"),
     lambda x: jnp.max(x, axis=(2, 3), keepdims=True), [_any(2, 2, 3, 4)], (0,)),
    ("gather", lambda x: _tg("gather", axis=1, batch_dims=0)(
        x, np.asarray([[0, 4], [-1, 0]], np.int32)),
     lambda x: x[:, jnp.asarray([[0, 4], [-1, 0]])], [_any(3, 5, 2)], (0,)),
    ("split", lambda x: eager.concat(
        [(lambda p: p[2])(_emit("split", 3, axis=1, sizes=[1, 2, 1])(x)),
         (lambda p: p[0] * 3.0)(_emit("split", 3, axis=1, sizes=[1, 2, 1])(x))], axis=1),
     lambda x: jnp.concatenate([x[:, 3:4], x[:, 0:1] * 3.0], axis=1), [_any(3, 4)], (0,)),
    ("dynamic_slice", lambda x: _tg("dynamic_slice", begin_mask=1, end_mask=1, shrink_mask=4,
                                    sizes=[-1, 2, 1])(
        x, np.asarray([0, -3, 1], np.int64), np.asarray([0, 3, 0], np.int64)),
     lambda x: x[:, 1:3, 1], [_any(3, 4, 2)], (0,)),
    ("identity_n", lambda a, b: (lambda o: o[0] * 2.0 + o[1] * o[1])(
        _emit("identity_n", 2)(a, b)), lambda a, b: a * 2.0 + b * b, [_any(3, 4), _any(3, 4)],
     (0, 1)),
]
def _conv_jax(x, w, layout, strides, padding, dilations, groups):
    dn = ("NHWC", "HWIO", "NHWC") if layout == "NHWC" else ("NCHW", "OIHW", "NCHW")
    return jax.lax.conv_general_dilated(x, w, strides, padding, rhs_dilation=dilations,
                                        dimension_numbers=dn, feature_group_count=groups)


def _window(layout, k):
    return (1, *k, 1) if layout == "NHWC" else (1, 1, *k)


def _pool_jax(x, kind, layout, k, strides, padding):
    win, st = _window(layout, k), _window(layout, strides)
    pad = padding if isinstance(padding, str) else (
        ((0, 0), *padding, (0, 0)) if layout == "NHWC" else ((0, 0), (0, 0), *padding))
    if kind == "max":
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, win, st, pad)
    total = jax.lax.reduce_window(x, 0.0, jax.lax.add, win, st, pad)
    count = jax.lax.reduce_window(jnp.ones_like(x), 0.0, jax.lax.add, win, st, pad)
    return total / count  # TF's average: padding not counted


CONVS = [  # layout, x shape, w shape, strides, padding (pytfrt attrs, jax), dilations, groups
    ("NHWC", (2, 7, 6, 3), (3, 3, 3, 4), (1, 1), ({"padding": "SAME"}, "SAME"), (1, 1), 1),
    ("NHWC", (1, 8, 7, 4), (3, 2, 2, 6), (2, 2), ({"padding": "SAME"}, "SAME"), (1, 1), 2),
    ("NCHW", (2, 3, 7, 6), (4, 3, 3, 3), (2, 1),
     ({"pads": [1, 0, 2, 1]}, ((1, 0), (2, 1))), (1, 2), 1),
    ("NCHW", (1, 2, 6, 6), (3, 2, 2, 2), (1, 1), ({"padding": "VALID"}, "VALID"), (2, 2), 1),
]
RULES += [(f"conv2d-{lay}-{'x'.join(map(str, ws))}-s{st[0]}{st[1]}-d{d[0]}-g{gr}",
           lambda x, w, lay=lay, st=st, pa=pa, d=d, gr=gr: _tg(
               "conv2d", layout=lay, strides=list(st), dilations=list(d), groups=gr, **pa[0])(x, w),
           lambda x, w, lay=lay, st=st, pa=pa, d=d, gr=gr: _conv_jax(x, w, lay, st, pa[1], d, gr),
           [_any(*xs), _any(*ws)], (0, 1))
          for lay, xs, ws, st, pa, d, gr in CONVS]
POOLS = [  # kind, layout, x shape, ksize, strides, padding (pytfrt attrs, jax)
    ("max", "NHWC", (2, 7, 6, 3), (3, 3), (2, 2), ({"padding": "SAME"}, "SAME")),
    ("max", "NCHW", (1, 2, 6, 5), (2, 2), (1, 1), ({"pads": [1, 0, 0, 1]}, ((1, 0), (0, 1)))),
    ("avg", "NHWC", (2, 7, 6, 3), (3, 2), (2, 2), ({"padding": "SAME"}, "SAME")),
    ("avg", "NCHW", (1, 2, 6, 5), (2, 2), (2, 1), ({"padding": "VALID"}, "VALID")),
]
RULES += [(f"{kind}_pool2d-{lay}-k{k[0]}{k[1]}-s{st[0]}{st[1]}",
           lambda x, kind=kind, lay=lay, k=k, st=st, pa=pa: _tg(
               f"{kind}_pool2d", layout=lay, ksize=list(k), strides=list(st), **pa[0])(x),
           lambda x, kind=kind, lay=lay, k=k, st=st, pa=pa: _pool_jax(x, kind, lay, k, st, pa[1]),
           [_any(*xs)], (0,))
          for kind, lay, xs, k, st, pa in POOLS]
def _bn_jax(x, scale, offset, mean, var, axis):
    shape = [1] * x.ndim
    shape[axis] = -1
    r = lambda v: v.reshape(shape)  # noqa: E731
    return (x - r(mean)) * r(scale) / jnp.sqrt(r(var) + 1e-3) + r(offset)


def _ln_jax(x, gamma, beta, axis):
    axes = tuple(range(axis % x.ndim, x.ndim))
    mu = jnp.mean(x, axis=axes, keepdims=True)
    v = jnp.mean((x - mu) ** 2, axis=axes, keepdims=True)
    return (x - mu) / jnp.sqrt(v + 1e-5) * gamma + beta


RULES += [
    ("batch_norm-NHWC", _tg("batch_norm", epsilon=1e-3, axis=-1),
     lambda *a: _bn_jax(*a, axis=3), [_any(2, 3, 2, 4), _any(4), _any(4), _any(4), _pos(4)],
     (0, 1, 2, 3, 4)),
    ("batch_norm-NCHW", _tg("batch_norm", epsilon=1e-3, axis=1),
     lambda *a: _bn_jax(*a, axis=1), [_any(2, 3, 2, 4), _any(3), _any(3), _any(3), _pos(3)],
     (0, 1, 2, 3, 4)),
    ("layer_norm-gamma-beta", _tg("layer_norm", axis=-1, epsilon=1e-5, has_gamma=True,
                                  has_beta=True),
     lambda x, ga, be: _ln_jax(x, ga, be, -1), [_any(3, 5), _any(5), _any(5)], (0, 1, 2)),
    ("layer_norm-plain", _tg("layer_norm", axis=1, epsilon=1e-5, has_gamma=False,
                             has_beta=False),
     lambda x: _ln_jax(x, 1.0, 0.0, 1), [_any(2, 3, 4)], (0,)),
]
RULES += [
    ("l2_normalize", _tg("l2_normalize", axis=[1], epsilon=1e-6),
     lambda x: x / jnp.sqrt(jnp.maximum(jnp.sum(x * x, axis=1, keepdims=True), 1e-6)),
     [_any(3, 4)], (0,)),
    ("l2_normalize-eps-bound", _tg("l2_normalize", axis=[0, 1], epsilon=4.0),
     lambda x: x / jnp.sqrt(jnp.maximum(jnp.sum(x * x, axis=(0, 1), keepdims=True), 4.0)),
     [_small(2, 2) * 0.5], (0,)),
]
RULES += [(f"cumsum-exclusive={e}-reverse={r}", _tg("cumsum", axis=1, exclusive=e, reverse=r),
           lambda x, e=e, r=r: _cumsum_jax(x, 1, e, r), [_any(3, 4)], (0,))
          for e in (False, True) for r in (False, True)]


@pytest.mark.parametrize("case", RULES, ids=[c[0] for c in RULES])
def test_rule(case):
    _, f_pt, f_jax, inputs, argnums = case
    _check(f_pt, f_jax, inputs, argnums)


def _op_of(test_name: str) -> str:
    return {"gelu_tanh": "gelu", "index": "slice"}.get(test_name, test_name.split("-")[0])


# op -> where its rule is checked against JAX and finite differences
CHECKED: dict[str, str] = {
    **{_op_of(c[0]): "test_autodiff.py" for c in base.UNARY + base.BINARY},
    "matmul": "test_autodiff.py::test_matmul_rule",
    **{_op_of(c[0]): "test_autodiff_catalogue.py" for c in RULES},
    **{_op_of(c[0]): "test_autodiff_more_rules.py" for c in more.ALL_RULES},
    "if": "test_autodiff_control.py (cond)",
    "while": "test_autodiff_control.py (while_loop)",
    "case": "test_autodiff_case.py",
    # against JAX only: finite differences see through a stop by definition
    "stop_gradient": "test_eager_ops.py::test_stop_gradient_and_grads_against_jax",
}


def test_every_catalogue_op_is_classified():
    problems = []
    for name in sorted(CATALOGUE):
        has_rule = name in VJP_RULES or name in MULTI_VJP_RULES or name in CONTROL_RULES
        kinds = [has_rule, name in NON_DIFFERENTIABLE, name in NO_RULE]
        if sum(kinds) != 1:
            problems.append(f"tg.{name}: in {sum(kinds)} of (rule, NON_DIFFERENTIABLE, NO_RULE)")
        elif has_rule and name not in CHECKED:
            problems.append(f"tg.{name}: a gradient rule no test checks against JAX/TF and "
                            "finite differences")
    for name in [*VJP_RULES, *MULTI_VJP_RULES, *CONTROL_RULES, *NON_DIFFERENTIABLE, *NO_RULE]:
        if name not in CATALOGUE:
            problems.append(f"tg.{name}: classified but not in the catalogue")
    problems += [f"tg.{n}: NO_RULE gives no reason" for n, why in NO_RULE.items()
                 if not why.strip()]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("op", "f"), [
    ("pad", lambda x: _tg("pad", pads=[1, 0, 0, -1], mode="edge")(x)),
    ("einsum", lambda x: _tg("einsum", equation="ij,kj->ik")(x, x[:1, :1])),
])
def test_unsupported_forms_raise_naming_op_and_line(op, f):
    with pytest.raises(AutodiffError, match=rf"tg.{op}.* no gradient rule .*at "
                       rf".*test_autodiff\w*.py:\d+"):
        pytfrt.grad(lambda x: eager.reduce_sum(f(x)))(_pos(2, 3))


@pytest.mark.parametrize("op", ["sign", "floor", "ceil", "round"])
def test_piecewise_constant_ops_give_zero_gradients(op):
    x = _away_from_zero(3, 4) + 0.25  # away from the jumps
    g = pytfrt.grad(lambda a: eager.reduce_sum(_tg(op)(a) * a))(x)
    jg = jax.grad(lambda a: jnp.sum(getattr(jnp, op)(a) * a))(x)
    np.testing.assert_allclose(g, jg, rtol=1e-6)


def test_second_order_through_activations():
    # the rules of tanh_grad / sigmoid_grad / relu_grad make grad-of-grad work through them
    for f_pt, f_jax in ((eager.tanh, jnp.tanh), (eager.sigmoid, jax.nn.sigmoid),
                        (lambda t: eager.relu(t) * t, lambda t: jax.nn.relu(t) * t)):
        d2 = pytfrt.grad(pytfrt.grad(lambda s, f=f_pt: f(s)))
        jd2 = jax.grad(jax.grad(f_jax))
        for s in (-0.7, 0.4, 1.3):
            assert float(d2(np.float32(s))) == pytest.approx(float(jd2(s)), rel=1e-4, abs=1e-6)


def test_unsupported_forms_raise():
    x = _any(2, 3)
    with pytest.raises(AutodiffError, match="tg.pad: negative pads"):
        pytfrt.grad(lambda a: eager.reduce_sum(_tg("pad", pads=[1, 0, -1, 0])(a)))(x)
