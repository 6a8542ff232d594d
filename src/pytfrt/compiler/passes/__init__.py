"""Graph passes: each a function ``GraphModule -> GraphModule`` (in place) and a ``tfrt_opt``
flag.

:data:`PASSES` maps flag names to passes, in :data:`DEFAULT_PIPELINE` order;
``-tg-default-pipeline`` runs that order.  ``docs/compiler.md`` shows each pass's effect.
"""

from __future__ import annotations

from collections.abc import Callable

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.add_layer_norm import fuse_add_layer_norm
from pytfrt.compiler.passes.attention import fuse_attention
from pytfrt.compiler.passes.attention_grad import fuse_attention_grad
from pytfrt.compiler.passes.batch_stats import fuse_batch_stats
from pytfrt.compiler.passes.batchnorm import fold_batch_norm
from pytfrt.compiler.passes.blocked import dnnl_blocked
from pytfrt.compiler.passes.buffers import plan_buffers
from pytfrt.compiler.passes.conv_grads import pair_conv_grads
from pytfrt.compiler.passes.conv_nchw_input import conv_nchw_input
from pytfrt.compiler.passes.cse import cse
from pytfrt.compiler.passes.elementwise import fuse_elementwise
from pytfrt.compiler.passes.epilogue import fuse_epilogue
from pytfrt.compiler.passes.fold import constant_fold, dce
from pytfrt.compiler.passes.fold_pad import fold_pad
from pytfrt.compiler.passes.infer_shapes import infer_shapes
from pytfrt.compiler.passes.layer_norm import fuse_layer_norm
from pytfrt.compiler.passes.layer_norm_grad import fuse_layer_norm_grad
from pytfrt.compiler.passes.layout import layout_nhwc
from pytfrt.compiler.passes.merge_matmul import merge_matmuls
from pytfrt.compiler.passes.optimizers import fuse_optimizer
from pytfrt.compiler.passes.quant import fold_quant
from pytfrt.compiler.passes.reshapes import fold_reshapes
from pytfrt.compiler.passes.shape_plan import shape_plans
from pytfrt.compiler.passes.small_graph import fuse_small_graph
from pytfrt.compiler.passes.softmax_grad import fuse_softmax_grad
from pytfrt.compiler.passes.squeeze_excite import fuse_squeeze_excite
from pytfrt.compiler.passes.weight_grads import flatten_weight_grads
from pytfrt.compiler.passes.weight_layout import matmul_weight_layout

Pass = Callable[[GraphModule], GraphModule]

PASSES: dict[str, Pass] = {
    "tg-infer-shapes": infer_shapes,
    "tg-fold-quant": fold_quant,
    "tg-constant-fold": constant_fold,
    "tg-cse": cse,
    "tg-fuse-layer-norm": fuse_layer_norm,
    "tg-dce": dce,
    "tg-fold-batch-norm": fold_batch_norm,
    "tg-layout-nhwc": layout_nhwc,
    "tg-fuse-attention": fuse_attention,
    "tg-merge-matmuls": merge_matmuls,
    "tg-fuse-epilogue": fuse_epilogue,
    "tg-fuse-add-layer-norm": fuse_add_layer_norm,
    "tg-matmul-weight-layout": matmul_weight_layout,
    "tg-fuse-squeeze-excite": fuse_squeeze_excite,
    "tg-fold-pad": fold_pad,
    "tg-fuse-batch-stats": fuse_batch_stats,
    "tg-fuse-optimizer": fuse_optimizer,
    "tg-flatten-weight-grads": flatten_weight_grads,
    "tg-fold-reshapes": fold_reshapes,
    "tg-fuse-layer-norm-grad": fuse_layer_norm_grad,
    "tg-fuse-softmax-grad": fuse_softmax_grad,
    "tg-fuse-attention-grad": fuse_attention_grad,
    "tg-pair-conv-grads": pair_conv_grads,
    "tg-shape-plans": shape_plans,
    "tg-fuse-elementwise": fuse_elementwise,
    "tg-fuse-small-graph": fuse_small_graph,
    "tg-conv-nchw-input": conv_nchw_input,
    "tg-dnnl-blocked": dnnl_blocked,
    "tg-plan-buffers": plan_buffers,
}
"""Flag name (without the dash) -> pass."""

DEFAULT_PIPELINE: tuple[str, ...] = (
    "tg-infer-shapes",
    "tg-fold-quant",
    "tg-constant-fold",
    "tg-cse",
    "tg-fuse-layer-norm",
    "tg-dce",
    "tg-fold-batch-norm",
    "tg-layout-nhwc",
    "tg-fuse-attention",
    "tg-merge-matmuls",
    "tg-fuse-epilogue",
    "tg-fuse-add-layer-norm",
    "tg-matmul-weight-layout",
    "tg-fuse-squeeze-excite",
    "tg-fold-pad",
    "tg-fuse-batch-stats",
    "tg-fuse-optimizer",
    "tg-flatten-weight-grads",
    "tg-fold-reshapes",
    "tg-fuse-layer-norm-grad",
    "tg-fuse-softmax-grad",
    "tg-fuse-attention-grad",
    "tg-pair-conv-grads",
    "tg-shape-plans",
    "tg-fuse-elementwise",
    "tg-dce",
    "tg-fuse-small-graph",
    "tg-conv-nchw-input",
    "tg-dnnl-blocked",
    "tg-plan-buffers",
)
"""The passes ``-tg-default-pipeline`` (and ``pytfrt.compile``) run, in order."""


def run_passes(gm: GraphModule, names: list[str] | tuple[str, ...],
               after: Callable[[str, GraphModule], None] | None = None) -> GraphModule:
    """Run the named passes in order; ``after(name, gm)`` is called after each.

    Raises:
        KeyError: for an unknown pass name.
    """
    for name in names:
        gm = PASSES[name](gm)
        if after is not None:
            after(name, gm)
    return gm


def default_pipeline(gm: GraphModule) -> GraphModule:
    """Run :data:`DEFAULT_PIPELINE` on ``gm`` (in place); returns it."""
    return run_passes(gm, DEFAULT_PIPELINE)


__all__ = ["DEFAULT_PIPELINE", "PASSES", "default_pipeline", "run_passes"]
