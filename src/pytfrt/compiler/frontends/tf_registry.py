"""The TF op -> graph dialect mapping table, filled by the ``tf_*`` converter modules.

Each supported TF op type has one :class:`TfOp` entry: its converter and a one-line note
(what it becomes, and its limits). ``docs/ops.md`` is generated from this table
(:func:`ops_markdown`) and a test checks the two agree.

A converter is ``convert(cx, node, ins) -> list[TV]``: ``cx`` is the translation context of the
function being built (:class:`pytfrt.compiler.frontends.tf_graph.FunctionContext`), ``node``
the TF ``NodeDef``, ``ins`` the translated inputs (control inputs dropped); it returns one
:class:`~.tf_values.TV` per TF output. It raises
:class:`~.tf_values.ConversionError` for a node it cannot express (the importer turns that
into ``UnsupportedOpError`` naming the node). The table is filled at import, then only read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Converter = Callable[[Any, Any, list[Any]], list[Any]]


@dataclass(frozen=True)
class TfOp:
    """One supported TF op type."""

    name: str
    convert: Converter
    tg: str
    note: str = ""
    family: str = ""


TF_OPS: dict[str, TfOp] = {}


def tf_op(
    *names: str, tg: str, note: str = "", family: str = ""
) -> Callable[[Converter], Converter]:
    """Register ``convert`` for the TF op types ``names`` (decorator; returns it unchanged).

    Raises:
        ValueError: if a name is registered twice.
    """

    def deco(fn: Converter) -> Converter:
        for name in names:
            if name in TF_OPS:
                raise ValueError(f"TF op {name} is registered twice")
            TF_OPS[name] = TfOp(name, fn, tg, note, family or fn.__module__.rsplit(".", 1)[-1])
        return fn

    return deco


def tf_direct(module: str, table: dict[str, str], note: str = "") -> None:
    """Register each TF op type of ``table`` (name -> graph dialect op) as that one op applied
    to all the node's operands, without attributes; ``module`` (the caller's ``__name__``)
    gives the family.

    Raises:
        ValueError: if a name is registered twice.
    """

    def convert(cx: Any, node: Any, ins: list[Any]) -> list[Any]:
        return [cx.op(table[node.op], ins)]

    family = module.rsplit(".", 1)[-1]
    for name, tg in table.items():
        tf_op(name, tg=f"`{tg}`", note=note, family=family)(convert)


_FAMILY_TITLES = {
    "tf_graph": "Graph structure",
    "tf_ops": "Math, neural network and linear algebra",
    "tf_array_ops": "Shapes and data movement",
    "tf_control": "Control flow and function calls",
    "tf_lists": "TensorLists (`tf.TensorArray`, Keras RNN layers)",
    "tf_state": "Variables and optimizers",
    "tf_grad": "Gradients",
    "tf_random": "Random numbers",
    "tf_volume": "3-D convolution and pooling",
    "tf_strings": "Strings and printing",
    "tf_complex": "Complex numbers (held as pairs of real tensors)",
}


def load_all() -> dict[str, TfOp]:
    """Import every converter module (filling :data:`TF_OPS`) and return the table."""
    from pytfrt.compiler.frontends import (  # noqa: F401
        tf_array_ops,
        tf_complex,
        tf_control,
        tf_grad,
        tf_graph,
        tf_lists,
        tf_ops,
        tf_random,
        tf_state,
        tf_strings,
        tf_volume,
    )

    return TF_OPS


def ops_markdown() -> str:
    """The TF section of ``docs/ops.md``: every supported TF op, by family, with its notes."""
    table = load_all()
    lines = [
        "## TensorFlow",
        "",
        "Generated from `pytfrt.compiler.frontends.tf_registry.TF_OPS` "
        "(`python -m pytfrt.compiler.frontends.tf_registry`); "
        "`tests/unit/frontends/test_tf_ops_doc.py` checks that this section matches the table.",
        "",
        f"{len(table)} TF op types are supported. Any other op raises `UnsupportedOpError` at "
        "compile time, naming the op type, the node and where it came from (the Python frame "
        "that created it, or the library function and the SavedModel; for a Keras model also "
        "the layer, and the line of the user's source that constructed it, found by its "
        "constructor call in the calling frames' files). Only nodes that feed an "
        "output or write a variable are translated. General limits:",
        "",
        "* numeric tensors, and string tensors for the string ops below (lookups, hashing, "
        "formatting, `tf.print`); complex tensors only as far as the complex-number ops below "
        "(a real FFT and what its gradient needs); no ragged or sparse tensors (but a "
        "`SparseCross` of dense columns);",
        "* operands that TF passes as tensors but the graph dialect takes as attributes (axes, "
        "permutations, paddings, slice bounds, ksize) must be known at import time: constants, "
        "or shape arithmetic the importer evaluates (`Shape`, `StridedSlice`, `Pack`, "
        "`BroadcastGradientArgs`... on static or partly static shapes);",
        "* dynamic dimensions (a `None` batch) stay dynamic; a reshape target with one unknown "
        "dimension becomes a `-1`, with more it is computed at run time;",
        "* gradients (`BroadcastGradientArgs`): two dynamic sizes broadcast against each other are "
        "taken to be equal (in TF's gradient graphs they are the same batch dimension);",
        "* variables must be captured from outside the function; they are frozen into weights "
        "unless the function writes one, then all become the model's variables;",
        "* random numbers: TF's stateless Philox ops only (what Keras `Dropout` uses in a train "
        "step), reproducing TF's bits; stateful random ops (`RandomUniform`...) are not supported.",
    ]
    for family, title in _FAMILY_TITLES.items():
        entries = sorted((op for op in table.values() if op.family == family), key=lambda o: o.name)
        if not entries:
            continue
        lines += [
            "",
            f"### {title}",
            "",
            "| TF op | graph dialect | notes |",
            "| --- | --- | --- |",
        ]
        for op in entries:
            lines.append(f"| `{op.name}` | {op.tg} | {op.note} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    # Run as a script this module is ``__main__``; the table lives in the imported module.
    from pytfrt.compiler.frontends import tf_registry

    print(tf_registry.ops_markdown(), end="")
