"""pytfrt.grad rules of the indexing, scattering and remaining nn ops: gather (batch_dims),
gather_nd, gather_elements, scatter_nd, scatter_elements (every reduction), top_k, one_hot (its
on/off values), slice with steps, pad (edge/reflect), depth_to_space (CRD), einsum, resize,
conv2d_transpose, reduce_prod (zero-safe), lrn; and the second-order rules of the gradient ops:
conv2d_backprop_input/filter, bias_add_grad, avg_pool2d_grad, max_pool2d_grad, and gelu_grad,
layer_norm_grad, batch_norm_grad and the cross-entropy ops (differentiated through their
expansion into catalogue ops).

Oracles: ``jax.value_and_grad`` of the equivalent ``jax.numpy`` / ``jax.lax`` function and
float64 central finite differences of pytfrt's own forward function (``test_autodiff._check``),
then the same gradient computed inside ``@pytfrt.function`` (optimised) against the eager one;
for max_pool2d_grad with ties, dilations and ceil mode, the kernel's own matrix.  Hypothesis
draws shapes, axes, zeros and indices for reduce_prod and the element gathers/scatters.
``test_autodiff_catalogue.py`` lists these rules as checked.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_autodiff import _any, _check, _scalarize, _tg

import pytfrt
from pytfrt import eager
from pytfrt.compiler.frontends import trace

jax = pytest.importorskip("jax")
jnp = jax.numpy

RNG = np.random.default_rng(11)


def _distinct(*shape: int) -> np.ndarray:
    """Values at least 0.1 apart (no ties for top_k)."""
    n = int(np.prod(shape))
    return (RNG.permutation(n).reshape(shape) * 0.1 - 0.05 * n).astype(np.float32)


def _first(op: str, n: int, **attrs: object):  # the first result of an n-result op
    return lambda *xs: trace.tracer_for(*xs).emit(op, list(xs), n_results=n, **attrs)[0]


def _i(a: object) -> np.ndarray:
    return np.asarray(a, np.int64)


# -- indexing and scattering --------------------------------------------------------------------

GND_IDX = _i([[[0, 1], [2, -1]], [[0, 1], [0, 1]]])  # [2, 2, 2]: a repeated row, a negative index
GND_B_IDX = np.asarray([[[1], [0], [1]], [[2], [2], [0]]], np.int32)  # batch_dims=1, [2, 3, 1]
GEL_IDX = _i([[0, 2, -1, 0], [1, 1, 0, 2]])  # [2, 4] into [3, 4] along axis 0, repeats
SEL_IDX = _i([[1, 0, 2], [2, 2, 0]])  # [2, 3] into [2, 4] along axis 1 (row 1 repeats column 2)
SND_IDX = _i([[2, 0], [0, 1], [2, 0]])  # rows of a [3, 2, 4] tensor; [2, 0] twice
SND_IDX_UNIQUE = _i([[2, 0], [0, -1]])


def _last_wins(keys: list[tuple[int, ...]]) -> np.ndarray:
    """Per write, whether no later write goes to the same place (NumPy's assignment rule)."""
    return np.asarray([keys[i] not in keys[i + 1:] for i in range(len(keys))])


def _scatter_set_jax(data, where, upd, winners):
    """``data`` with ``upd`` written at ``where``, only the winning write of each place
    counting: independent of how the backend orders repeated writes."""
    written = jnp.zeros(data.shape, bool).at[where].set(True)
    return jnp.where(written, 0.0, data) + jnp.zeros_like(data).at[where].add(
        jnp.where(winners, upd, 0.0))


def _sel_where(idx: np.ndarray, axis: int):
    grid = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx
    return tuple(grid)


_SEL_WIN = _last_wins([(r, int(c)) for r, row in enumerate(SEL_IDX) for c in row]).reshape(
    SEL_IDX.shape)
# _SEL_DENSE[r, k, col]: update (r, k) goes to column col (scatter along axis 1)
_SEL_DENSE = SEL_IDX[..., None] == np.arange(4)


def _zeros_at(x: np.ndarray, flat: list[int]) -> np.ndarray:
    x.reshape(-1)[flat] = 0.0
    return x


_SND_WIN = _last_wins([tuple(r) for r in SND_IDX])[:, None]


def _gather_nd_b1_jax(x):
    return jnp.stack([x[b][GND_B_IDX[b, :, 0]] for b in range(x.shape[0])])


RULES = [
    ("gather_nd", lambda x: _tg("gather_nd", batch_dims=0)(x, GND_IDX),
     lambda x: x[GND_IDX[..., 0], GND_IDX[..., 1] % 4], [_any(3, 4, 2)], (0,)),
    ("gather_nd-batch_dims", lambda x: _tg("gather_nd", batch_dims=1)(x, GND_B_IDX),
     _gather_nd_b1_jax, [_any(2, 3, 4)], (0,)),
    ("gather-batch_dims", lambda x: _tg("gather", axis=2, batch_dims=1)(x, GND_B_IDX[..., 0]),
     lambda x: jnp.stack([x[b][:, GND_B_IDX[b, :, 0]] for b in range(2)]), [_any(2, 2, 3, 4)],
     (0,)),
    ("gather_elements", lambda x: _tg("gather_elements", axis=0)(x, GEL_IDX),
     lambda x: jnp.take_along_axis(x, GEL_IDX % 3, axis=0), [_any(3, 4)], (0,)),
    ("scatter_elements-none",
     lambda d, u: _tg("scatter_elements", axis=1, reduction="none")(d, SEL_IDX, u),
     lambda d, u: _scatter_set_jax(d, _sel_where(SEL_IDX, 1), u, _SEL_WIN),
     [_any(2, 4), _any(2, 3)], (0, 1)),
    ("scatter_elements-add",
     lambda d, u: _tg("scatter_elements", axis=1, reduction="add")(d, SEL_IDX, u),
     lambda d, u: jnp.asarray(d).at[_sel_where(SEL_IDX, 1)].add(u), [_any(2, 4), _any(2, 3)],
     (0, 1)),
    *[(f"scatter_elements-{red}",
       lambda d, u, red=red: _tg("scatter_elements", axis=1, reduction=red)(d, SEL_IDX, u),
       lambda d, u, red=red: getattr(jnp.asarray(d).at[_sel_where(SEL_IDX, 1)], red)(u),
       [_distinct(2, 4), _distinct(2, 3) + 0.05], (0, 1)) for red in ("max", "min")],
    ("scatter_elements-mul",
     lambda d, u: _tg("scatter_elements", axis=1, reduction="mul")(d, SEL_IDX, u),
     lambda d, u: d * jnp.prod(jnp.where(_SEL_DENSE, u[..., None], 1.0), axis=1),
     [_zeros_at(_any(2, 4), [0, 5]), _zeros_at(_any(2, 3), [4])], (0, 1)),
    ("scatter_elements-mul-two-zeros",
     lambda d, u: _tg("scatter_elements", axis=1, reduction="mul")(d, SEL_IDX, u),
     lambda d, u: d * jnp.prod(jnp.where(_SEL_DENSE, u[..., None], 1.0), axis=1),
     [_zeros_at(_any(2, 4), [6]), _zeros_at(_any(2, 3), [3, 5])], (0, 1)),
    ("scatter_nd", lambda d, u: _tg("scatter_nd")(d, SND_IDX, u),
     lambda d, u: _scatter_set_jax(d, (SND_IDX[:, 0], SND_IDX[:, 1]), u, _SND_WIN),
     [_any(3, 2, 4), _any(3, 4)], (0, 1)),
    ("scatter_nd-unique", lambda d, u: _tg("scatter_nd")(d, SND_IDX_UNIQUE, u),
     lambda d, u: jnp.asarray(d).at[SND_IDX_UNIQUE[:, 0], SND_IDX_UNIQUE[:, 1] % 2].set(u),
     [_any(3, 2, 4), _any(2, 4)], (0, 1)),
    ("top_k", lambda x: _first("top_k", 2, sorted=True)(x, _i(3)),
     lambda x: jax.lax.top_k(x, 3)[0], [_distinct(2, 3, 5)], (0,)),
    ("one_hot", lambda on, off: _tg("one_hot", axis=0)(_i([[1, 3], [0, 7]]), _i(4), on, off),
     lambda on, off: jnp.where(jax.nn.one_hot(_i([[1, 3], [0, 7]]), 4, axis=0) > 0, on, off),
     [np.float32(0.8), np.float32(-0.3)], (0, 1)),
]

RULES += [
    ("slice-step2", lambda x: x[::2], lambda x: x[::2], [_any(5, 7)], (0,)),
    ("slice-steps-mixed", lambda x: x[1:, ::-1], lambda x: x[1:, ::-1], [_any(5, 7)], (0,)),
    ("slice-steps-negative", lambda x: x[::-2, 1::3], lambda x: x[::-2, 1::3], [_any(5, 7)],
     (0,)),
    ("slice-steps-and-unit", lambda x: x[1:4, -2:0:-2], lambda x: x[1:4, -2:0:-2], [_any(5, 7)],
     (0,)),
]

RULES += [(f"pad-{mode}", _tg("pad", pads=[2, 0, 1, 3], mode=mode),
           lambda x, mode=mode: jnp.pad(x, ((2, 1), (0, 3)), mode=mode), [_any(4, 5)], (0,))
          for mode in ("edge", "reflect", "wrap")]

def _d2s_crd_jax(x, b, layout):  # ONNX DepthToSpace, CRD mode
    if layout == "NCHW":
        x = x.transpose(0, 2, 3, 1)
    n, h, w, c = x.shape
    y = x.reshape(n, h, w, c // (b * b), b, b).transpose(0, 1, 4, 2, 5, 3)
    y = y.reshape(n, h * b, w * b, c // (b * b))
    return y if layout == "NHWC" else y.transpose(0, 3, 1, 2)


RULES += [(f"depth_to_space-CRD-{lay}",
           _tg("depth_to_space", block_size=2, layout=lay, mode="CRD"),
           lambda x, lay=lay: _d2s_crd_jax(x, 2, lay),
           [_any(*((1, 2, 3, 8) if lay == "NHWC" else (1, 8, 2, 3)))], (0,))
          for lay in ("NHWC", "NCHW")]

# -- einsum ---------------------------------------------------------------------------------------

EINSUMS = [  # equation, operand shapes
    ("ij,jk->ik", [(3, 4), (4, 2)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
    ("ij,jk", [(3, 4), (4, 2)]),  # implicit output
    ("ij,kl->ik", [(3, 4), (2, 5)]),  # j and l summed away in one operand only
    ("ij->", [(3, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("...ij,jk->...ik", [(2, 3, 3, 4), (4, 2)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("ii->", [(3, 3)]),  # a trace
    ("iij,jk->ik", [(3, 3, 2), (2, 4)]),  # a diagonal, summed against another operand
    ("ii,ij->ij", [(3, 3), (3, 4)]),
]
RULES += [(f"einsum-{eq}", lambda *xs, eq=eq: _tg("einsum", equation=eq)(*xs),
           lambda *xs, eq=eq: jnp.einsum(eq, *xs), [_any(*s) for s in shapes],
           tuple(range(len(shapes))))
          for eq, shapes in EINSUMS]

# -- resize: ONNX Resize written in jax.numpy (per axis: source coordinates, then gather/lerp) -----


def _src(n_in: int, n_out: int, ctm: str) -> np.ndarray:
    o = np.arange(n_out, dtype=np.float64)
    s = n_out / n_in
    return {"half_pixel": (o + 0.5) / s - 0.5, "asymmetric": o / s,
            "align_corners": o * (n_in - 1) / max(n_out - 1, 1)}[ctm]


def _resize_axis_jax(x, axis, n_out, mode, ctm):
    n_in = x.shape[axis]
    src = _src(n_in, n_out, ctm)
    if mode == "nearest":  # round_prefer_floor
        return jnp.take(x, np.clip(np.ceil(src - 0.5), 0, n_in - 1).astype(np.int64), axis=axis)
    src = np.clip(src, 0, n_in - 1)
    lo = np.floor(src).astype(np.int64)
    hi = np.minimum(lo + 1, n_in - 1)
    shape = [1] * x.ndim
    shape[axis] = n_out
    frac = (src - lo).reshape(shape).astype(np.float32)
    a, b = jnp.take(x, lo, axis=axis), jnp.take(x, hi, axis=axis)
    return a + (b - a) * frac


RESIZES = [  # layout, x shape, size, mode, coordinate transformation
    ("NHWC", (1, 3, 4, 2), (5, 7), "linear", "half_pixel"),
    ("NCHW", (2, 1, 5, 6), (3, 4), "linear", "align_corners"),
    ("NHWC", (1, 3, 4, 2), (6, 3), "nearest", "asymmetric"),
    ("NCHW", (1, 2, 4, 3), (7, 5), "nearest", "half_pixel"),
]
RULES += [(f"resize-{lay}-{mode}-{ctm}-{size[0]}x{size[1]}",
           lambda x, lay=lay, size=size, mode=mode, ctm=ctm: _tg(
               "resize", size=list(size), layout=lay, mode=mode,
               coordinate_transformation_mode=ctm)(x),
           lambda x, lay=lay, size=size, mode=mode, ctm=ctm: _resize_axis_jax(
               _resize_axis_jax(x, 1 if lay == "NHWC" else 2, size[0], mode, ctm),
               2 if lay == "NHWC" else 3, size[1], mode, ctm),
           [_any(*xs)], (0,))
          for lay, xs, size, mode, ctm in RESIZES]

# -- convolutions: transposed, and the second order of conv2d -------------------------------------


def _conv_jax(x, w, layout, strides, pads, dilations, groups):
    dn = ("NHWC", "HWIO", "NHWC") if layout == "NHWC" else ("NCHW", "OIHW", "NCHW")
    return jax.lax.conv_general_dilated(x, w, strides, ((pads[0], pads[1]), (pads[2], pads[3])),
                                        rhs_dilation=dilations, dimension_numbers=dn,
                                        feature_group_count=groups)


def _conv_input_vjp(y_shape, w, dy, *conv):
    """The input gradient of the forward conv (what conv2d_transpose / backprop_input are)."""
    return jax.vjp(lambda y: _conv_jax(y, w, *conv), jnp.zeros(y_shape, dy.dtype))[1](dy)[0]


def _conv_filter_vjp(x, w_shape, dy, *conv):
    return jax.vjp(lambda w: _conv_jax(x, w, *conv), jnp.zeros(w_shape, dy.dtype))[1](dy)[0]


CONV_T = [  # layout, x shape, w shape, transposed output shape, strides, pads, dilations, groups,
    #         output_padding
    ("NHWC", (2, 3, 4, 4), (3, 3, 3, 4), (2, 5, 7, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, (0, 0)),
    ("NHWC", (1, 3, 3, 4), (2, 2, 3, 4), (1, 7, 6, 6), (2, 2), (0, 0, 0, 0), (1, 1), 2, (1, 0)),
    ("NCHW", (1, 4, 3, 3), (4, 2, 3, 2), (1, 2, 5, 5), (1, 1), (0, 0, 0, 0), (1, 2), 1, (0, 0)),
]
RULES += [(f"conv2d_transpose-{lay}-s{st[0]}-g{gr}-op{op[0]}",
           lambda x, w, lay=lay, st=st, p=p, d=d, gr=gr, op=op: _tg(
               "conv2d_transpose", layout=lay, strides=list(st), pads=list(p), dilations=list(d),
               groups=gr, output_padding=list(op))(x, w),
           lambda x, w, lay=lay, ys=ys, st=st, p=p, d=d, gr=gr: _conv_input_vjp(
               ys, w, x, lay, st, p, d, gr),
           [_any(*xs), _any(*ws)], (0, 1))
          for lay, xs, ws, ys, st, p, d, gr, op in CONV_T]

BACKPROP = [  # layout, forward input shape, filter shape, forward output shape, strides, pads,
    #           dilations, groups
    ("NHWC", (2, 5, 6, 2), (3, 3, 2, 3), (2, 3, 3, 3), (2, 2), (1, 1, 1, 0), (1, 1), 1),
    ("NCHW", (1, 4, 5, 5), (4, 2, 2, 2), (1, 4, 2, 4), (2, 1), (0, 0, 0, 0), (1, 1), 2),
]
RULES += [(f"conv2d_backprop_input-{lay}",
           lambda w, dy, lay=lay, xs=xs, st=st, p=p, d=d, gr=gr: _tg(
               "conv2d_backprop_input", layout=lay, strides=list(st), pads=list(p),
               dilations=list(d), groups=gr)(_i(xs), w, dy),
           lambda w, dy, lay=lay, xs=xs, st=st, p=p, d=d, gr=gr: _conv_input_vjp(
               xs, w, dy, lay, st, p, d, gr),
           [_any(*ws), _any(*ys)], (0, 1))
          for lay, xs, ws, ys, st, p, d, gr in BACKPROP]
RULES += [(f"conv2d_backprop_filter-{lay}",
           lambda x, dy, lay=lay, ws=ws, st=st, p=p, d=d, gr=gr: _tg(
               "conv2d_backprop_filter", layout=lay, strides=list(st), pads=list(p),
               dilations=list(d), groups=gr)(x, _i(ws), dy),
           lambda x, dy, lay=lay, ws=ws, st=st, p=p, d=d, gr=gr: _conv_filter_vjp(
               x, ws, dy, lay, st, p, d, gr),
           [_any(*xs), _any(*ys)], (0, 1))
          for lay, xs, ws, ys, st, p, d, gr in BACKPROP]

# -- the other gradient ops (second order) --------------------------------------------------------


def _avg_pool_jax(x, layout, k, strides, pads):
    win = (1, *k, 1) if layout == "NHWC" else (1, 1, *k)
    st = (1, *strides, 1) if layout == "NHWC" else (1, 1, *strides)
    sp = ((pads[0], pads[1]), (pads[2], pads[3]))
    pad = ((0, 0), *sp, (0, 0)) if layout == "NHWC" else ((0, 0), (0, 0), *sp)
    total = jax.lax.reduce_window(x, 0.0, jax.lax.add, win, st, pad)
    count = jax.lax.reduce_window(jnp.ones_like(x), 0.0, jax.lax.add, win, st, pad)
    return total / count  # padding not counted


RULES += [
    ("bias_add_grad-NHWC", _tg("bias_add_grad", layout="NHWC"),
     lambda dy: jnp.sum(dy, axis=(0, 1, 2)), [_any(2, 3, 2, 4)], (0,)),
    ("bias_add_grad-rank1", _tg("bias_add_grad", layout="NHWC"), lambda dy: dy, [_any(4)], (0,)),
    ("bias_add_grad-NCHW", _tg("bias_add_grad", layout="NCHW"),
     lambda dy: jnp.sum(dy, axis=(0, 2, 3)), [_any(2, 3, 2, 4)], (0,)),
    ("avg_pool2d_grad", lambda dy: _tg(
        "avg_pool2d_grad", layout="NHWC", ksize=[3, 2], strides=[2, 2], pads=[1, 1, 0, 1],
        count_include_pad=False)(_i([2, 5, 5, 3]), dy),
     lambda dy: jax.vjp(lambda x: _avg_pool_jax(x, "NHWC", (3, 2), (2, 2), (1, 1, 0, 1)),
                        jnp.zeros((2, 5, 5, 3), dy.dtype))[1](dy)[0],
     [_any(2, 3, 3, 3)], (0,)),
]

# -- reduce_prod (zeros included) and lrn ---------------------------------------------------------


def _with_zeros(*shape: int) -> np.ndarray:
    x = _any(*shape)
    x.reshape(-1)[[1, 5, 6]] = 0.0  # one zero in a row, two in another
    return x


RULES += [
    ("reduce_prod-axis1", lambda x: _tg("reduce_prod", axes=[1], keepdims=False)(x),
     lambda x: jnp.prod(x, axis=1), [_with_zeros(3, 5)], (0,)),
    ("reduce_prod-axes02-keepdims", lambda x: _tg("reduce_prod", axes=[0, 2], keepdims=True)(x),
     lambda x: jnp.prod(x, axis=(0, 2), keepdims=True), [_with_zeros(2, 3, 3)], (0,)),
    ("reduce_prod-all", lambda x: _tg("reduce_prod", axes=[], keepdims=False)(x),
     jnp.prod, [_any(2, 3) * 0.9 + 0.2], (0,)),
    ("reduce_prod-size1", lambda x: _tg("reduce_prod", axes=[1], keepdims=False)(x),
     lambda x: jnp.prod(x, axis=1), [_any(3, 1)], (0,)),
]


def _lrn_jax(x, r, bias, alpha, beta, axis):
    y = jnp.moveaxis(x, axis, -1)
    c = y.shape[-1]
    sq = jnp.pad(y * y, [(0, 0)] * (y.ndim - 1) + [(r, r)])
    window = sum(sq[..., i:i + c] for i in range(2 * r + 1))
    return jnp.moveaxis(y / (bias + alpha * window) ** beta, -1, axis)


RULES += [
    ("lrn-last", _tg("lrn", depth_radius=2, bias=1.0, alpha=0.3, beta=0.75, axis=-1),
     lambda x: _lrn_jax(x, 2, 1.0, 0.3, 0.75, -1), [_any(2, 3, 7)], (0,)),
    ("lrn-axis1", _tg("lrn", depth_radius=1, bias=2.0, alpha=1.0, beta=0.5, axis=1),
     lambda x: _lrn_jax(x, 1, 2.0, 1.0, 0.5, 1), [_any(2, 4, 3, 2)], (0,)),
]


def test_reduce_prod_zero_gradients_are_exact():
    # a row with one zero: only that entry's gradient is non-zero (the product of the others)
    x = np.asarray([[2.0, 0.0, 3.0, -1.0], [0.0, 4.0, 0.0, 5.0]], np.float32)
    g = pytfrt.grad(lambda a: eager.reduce_sum(_tg("reduce_prod", axes=[1], keepdims=False)(a)))(x)
    np.testing.assert_array_equal(g, [[0.0, -6.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])


# -- gradient ops differentiated through their expansion (second order) ---------------------------


def _nth(op: str, n: int, i: int, **attrs: object):  # result i of an n-result op
    return lambda *xs: trace.tracer_for(*xs).emit(op, list(xs), n_results=n, **attrs)[i]


def _gelu_d(x, approximate):
    return jax.grad(lambda t: jnp.sum(jax.nn.gelu(t, approximate=approximate)))(x)


def _ln_jax(x, gamma, beta, axis):
    axes = tuple(range(axis % x.ndim, x.ndim))
    mu = jnp.mean(x, axis=axes, keepdims=True)
    v = jnp.mean((x - mu) ** 2, axis=axes, keepdims=True)
    return (x - mu) / jnp.sqrt(v + 1e-5) * gamma + beta


def _ln_grad_jax(dy, x, gamma, axis):
    beta = jnp.zeros_like(gamma)
    return jax.vjp(lambda a, b, c: _ln_jax(a, b, c, axis), x, gamma, beta)[1](dy)


def _bn_grad_jax(dy, x, scale, mean, var, training):
    """TF's FusedBatchNormGrad over NHWC (channel last), mean/variance given."""
    inv = 1.0 / jnp.sqrt(var + 1e-3)
    xhat = (x - mean) * inv
    doffset = jnp.sum(dy, axis=(0, 1, 2))
    dscale = jnp.sum(dy * xhat, axis=(0, 1, 2))
    n = x.size // x.shape[-1]
    dx = scale * inv * ((dy - doffset / n - xhat * dscale / n) if training else dy)
    return dx, dscale, doffset


def _xent_jax(logits, labels):
    logp = jax.nn.log_softmax(logits, axis=1)
    return -jnp.sum(labels * logp, axis=1), jax.nn.softmax(logits, axis=1) - labels


SPARSE = np.asarray([2, 0, 3], np.int32)
BN_IN = [_any(2, 3, 2, 4), _any(2, 3, 2, 4), _any(4), _any(4), RNG.uniform(0.5, 2.0, 4).astype(
    np.float32)]

RULES2 = [
    (f"gelu_grad-approximate={a}", _tg("gelu_grad", approximate=a),
     lambda dy, x, a=a: dy * _gelu_d(x, a), [_any(3, 4), _any(3, 4)], (0, 1))
    for a in (False, True)
]
RULES2 += [(f"layer_norm_grad-{i}-axis{ax}",
            lambda dy, x, ga, i=i, ax=ax: _nth("layer_norm_grad", 3, i, axis=ax, epsilon=1e-5)(
                dy, x, ga),
            lambda dy, x, ga, i=i, ax=ax: _ln_grad_jax(dy, x, ga, ax)[i],
            [_any(3, 2, 4), _any(3, 2, 4), _any(*((2, 4) if ax == 1 else (4,)))], (0, 1, 2))
           for i in range(3) for ax in (1, -1)]
RULES2 += [(f"batch_norm_grad-{i}-training={t}",
            lambda *a, i=i, t=t: _nth("batch_norm_grad", 3, i, epsilon=1e-3, axis=-1,
                                      is_training=t)(*a),
            lambda *a, i=i, t=t: _bn_grad_jax(*a, training=t)[i], BN_IN, (0, 1, 2, 3, 4))
           for i in range(3) for t in (False, True)]
RULES2 += [(f"softmax_cross_entropy-{i}", _nth("softmax_cross_entropy", 2, i),
            lambda lg, lb, i=i: _xent_jax(lg, lb)[i],
            [_any(3, 5), RNG.dirichlet(np.ones(5), 3).astype(np.float32)], (0, 1))
           for i in range(2)]
RULES2 += [(f"sparse_softmax_cross_entropy-{i}",
            lambda lg, i=i: _nth("sparse_softmax_cross_entropy", 2, i)(lg, SPARSE),
            lambda lg, i=i: _xent_jax(lg, jax.nn.one_hot(SPARSE, 5))[i], [_any(3, 5)], (0,))
           for i in range(2)]
def _max_pool_jax(x, layout, k, strides, pads, dilations):
    win = (1, *k, 1) if layout == "NHWC" else (1, 1, *k)
    st = (1, *strides, 1) if layout == "NHWC" else (1, 1, *strides)
    dil = (1, *dilations, 1) if layout == "NHWC" else (1, 1, *dilations)
    sp = ((pads[0], pads[1]), (pads[2], pads[3]))
    pad = ((0, 0), *sp, (0, 0)) if layout == "NHWC" else ((0, 0), (0, 0), *sp)
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, win, st, pad, window_dilation=dil)


MAX_POOLS = [  # layout, x shape, ksize, strides, pads, dilations, ceil_mode
    ("NHWC", (2, 5, 6, 2), (3, 3), (2, 2), (1, 1, 1, 0), (1, 1), False),
    ("NCHW", (1, 2, 6, 7), (2, 3), (1, 2), (0, 1, 1, 1), (1, 1), False),
    ("NHWC", (1, 5, 5, 1), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), True),  # a ragged last window
]


def _max_pool_grad_case(lay, xs, k, st, p, d, ceil):
    x = _distinct(*xs)  # no ties: JAX's choice among equal maxima is its own
    attrs = {"layout": lay, "ksize": list(k), "strides": list(st), "pads": list(p),
             "dilations": list(d), "ceil_mode": ceil}
    y = np.asarray(pytfrt.function(_tg("max_pool2d", **attrs))(x))
    # the pooled output JAX computes, with the extra bottom/right padding of ceil mode
    jp = list(p)
    if ceil:
        jp[1] += 1
        jp[3] += 1
    f_jax = lambda dy: jax.vjp(  # noqa: E731
        lambda a: _max_pool_jax(a, lay, k, st, jp, d), jnp.asarray(x))[1](dy)[0]
    return (f"max_pool2d_grad-{lay}-k{k[0]}{k[1]}-ceil={ceil}",
            lambda dy: _tg("max_pool2d_grad", **attrs)(*_like(dy, x, y), dy), f_jax,
            [_any(*y.shape)], (0,))


def _like(dy, *arrays):  # constants in the element type of the traced dy (f64 for the FDs)
    return [a.astype(np.float64) if dy.value.dtype == "f64" else a for a in arrays]


RULES2 += [_max_pool_grad_case(*m) for m in MAX_POOLS]

ALL_RULES = RULES + RULES2


@pytest.mark.parametrize("case", ALL_RULES, ids=[c[0] for c in ALL_RULES])
def test_rule(case):
    _, f_pt, f_jax, inputs, argnums = case
    _check(f_pt, f_jax, inputs, argnums)


@pytest.mark.parametrize("case", ALL_RULES, ids=[c[0] for c in ALL_RULES])
def test_rule_under_function(case):
    """The gradient traced into an optimised ``@pytfrt.function`` equals the eager one."""
    _, f_pt, f_jax, inputs, argnums = case
    w = RNG.uniform(-1, 1, np.shape(f_jax(*inputs))).astype(np.float32)
    g_eager = pytfrt.grad(_scalarize(f_pt, w), argnums=argnums)(*inputs)
    g_fn = pytfrt.function(pytfrt.grad(_scalarize(f_pt, w), argnums=argnums))(*inputs)
    for a, b in zip(g_eager, g_fn, strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("attrs", [
    {"layout": "NHWC", "ksize": [2, 2], "strides": [1, 1], "pads": [1, 0, 0, 1]},
    {"layout": "NCHW", "ksize": [2, 3], "strides": [1, 2], "pads": [0, 1, 1, 1],
     "dilations": [2, 1]},
    {"layout": "NHWC", "ksize": [3, 2], "strides": [2, 2], "pads": [1, 1, 0, 0],
     "ceil_mode": True},
])
def test_max_pool2d_grad_rule_follows_the_kernel(attrs):
    """Tied maxima, dilations, ceil mode: the transpose reads ``g`` where the kernel sent
    ``dy``.  The oracle is the kernel's own matrix (max_pool2d_grad is linear in dy), built
    column by column."""
    x = np.round(_any(1, 5, 6, 2)).astype(np.float32)  # few distinct values: many ties
    y = np.asarray(pytfrt.function(_tg("max_pool2d", **attrs))(x))
    op = pytfrt.function(lambda dy: _tg("max_pool2d_grad", **attrs)(x, y, dy))
    cols = []
    for k in range(y.size):
        e = np.zeros(y.size, np.float32)
        e[k] = 1.0
        cols.append(np.asarray(op(e.reshape(y.shape))).reshape(-1))
    jac = np.stack(cols, axis=1)  # [x.size, y.size]
    g = _any(*x.shape)
    got = pytfrt.grad(lambda dy: eager.reduce_sum(op(dy) * g))(np.zeros(y.shape, np.float32))
    np.testing.assert_allclose(np.asarray(got).reshape(-1), jac.T @ g.reshape(-1), rtol=1e-6)


def test_second_order_of_layer_norm_and_cross_entropy():
    # grad of grad through layer_norm (its rule emits layer_norm_grad) and a softmax loss
    x, w = _any(3, 4), _any(4, 5)
    lab = RNG.dirichlet(np.ones(5), 3).astype(np.float32)

    def loss(p):
        h = _tg("layer_norm", axis=-1, epsilon=1e-5, has_gamma=False, has_beta=False)(p[0] * x)
        return eager.reduce_sum(_nth("softmax_cross_entropy", 2, 0)(h @ w, lab))

    def jloss(p):
        h = _ln_jax(x * p[0], 1.0, 0.0, -1)
        return jnp.sum(_xent_jax(h @ w, lab)[0])

    p = np.asarray([0.7], np.float32)
    d2 = pytfrt.grad(lambda q: eager.reduce_sum(pytfrt.grad(loss)(q)))(p)
    jd2 = jax.grad(lambda q: jnp.sum(jax.grad(jloss)(q)))(p)
    np.testing.assert_allclose(d2, jd2, rtol=2e-4, atol=2e-5)


@settings(max_examples=12, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_reduce_prod_random_shapes_axes_and_zeros(shape, data):
    """Zeros anywhere (several in one reduced group included), any axes, either keepdims."""
    x = _any(*shape)
    zeros = data.draw(st.lists(st.integers(0, x.size - 1), max_size=3))
    x.reshape(-1)[zeros] = 0.0
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
    keep = data.draw(st.booleans())
    _check(lambda a: _tg("reduce_prod", axes=axes, keepdims=keep)(a),
           lambda a: jnp.prod(a, axis=tuple(axes) or None, keepdims=keep), [x], (0,))


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 5), st.integers(0, 1), st.data())
def test_gather_elements_and_scatter_add_random_indices(rows, cols, n_idx, axis, data):
    """Random (often repeated, sometimes negative) indices: gather_elements and the adding
    scatter_elements, each the other's transpose."""
    shape = (rows, cols)
    dim = shape[axis]
    ishape = (n_idx, cols) if axis == 0 else (rows, n_idx)
    flat = data.draw(st.lists(st.integers(-dim, dim - 1), min_size=n_idx * ishape[1 - axis],
                              max_size=n_idx * ishape[1 - axis]))
    idx = np.asarray(flat, np.int64).reshape(ishape)
    where = _sel_where(idx % dim, axis)
    _check(lambda x: _tg("gather_elements", axis=axis)(x, idx),
           lambda x: jnp.asarray(x)[where], [_any(*shape)], (0,))
    _check(lambda d, u: _tg("scatter_elements", axis=axis, reduction="add")(d, idx, u),
           lambda d, u: jnp.asarray(d).at[where].add(u), [_any(*shape), _any(*ishape)], (0, 1))
