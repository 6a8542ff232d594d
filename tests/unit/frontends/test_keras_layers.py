"""Every public class of ``keras.layers``, compiled for inference and a train step, against TF.

For each class (:mod:`keras_layer_cases`: a tiny model around it, batch 2), the ``tf.function``
returning the inference output and the loss of one SGD step is compiled with
``pytfrt.compile``; the compiled model's output, loss and updated weights must match what TF
computes from the same starting weights (max relative error 1e-4).

The layers that do not compile are listed, each with its reason, in ``docs/ops.md`` ("Keras
layers"); for those the test checks that compiling fails with ``UnsupportedOpError`` (never
a silently wrong model), and fails if one starts compiling (then take it off the list). The
classes that are not layers to compile (base classes, other backends' wrappers) are listed
there too, and every public class must be in one place or the other.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import keras_layer_cases as cases  # a sibling module (pytest puts this folder on sys.path)
import numpy as np
import pytest

import pytfrt
from pytfrt.compiler.errors import UnsupportedOpError

HERE = Path(__file__).resolve().parent
DOC = HERE.parents[2] / "docs" / "ops.md"




def _doc_table(title: str) -> dict[str, str]:
    """``| `Name` | reason |`` rows of the docs/ops.md table under heading ``title``."""
    text = DOC.read_text()
    start = text.index(f"### {title}\n")
    end = text.find("\n#", start + 4)
    rows = re.findall(r"^\| `(\w+)` \| (.+?) \|$", text[start : end if end > 0 else None], re.M)
    return dict(rows)


UNSUPPORTED = _doc_table("Keras layers that do not compile")
NOT_LAYERS_DOC = _doc_table("Classes of keras.layers that are not layers to compile")


def test_every_public_class_is_covered(tf: Any) -> None:
    import keras

    names = cases.layer_names(keras)
    missing = sorted(n for n in names if n not in cases.CASES and n not in cases.NOT_LAYERS)
    assert not missing, f"public classes of keras.layers without a case: {missing}"
    assert sorted(UNSUPPORTED) == sorted(n for n in UNSUPPORTED if n in cases.CASES), (
        "docs/ops.md lists layers that have no case"
    )
    assert NOT_LAYERS_DOC == cases.NOT_LAYERS, "docs/ops.md's non-layer list is out of date"
    for reason in UNSUPPORTED.values():
        assert len(reason) > 10, "each unsupported layer needs a reason"
    compiled = len(cases.CASES) - len(UNSUPPORTED)
    assert compiled / len(cases.CASES) >= 0.95


def _rel(out: Any, ref: Any) -> float:
    a = np.asarray(out, dtype=np.float64)
    b = np.asarray(ref, dtype=np.float64)
    assert a.shape == b.shape, f"shape {a.shape} != TF's {b.shape}"
    if b.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def _compiled_names(tf: Any, step: Any) -> dict[int, str]:
    """The compiled model's name of each variable ``step`` captures, by ``id`` of its handle
    (the importer's own naming: two Keras variables may share a TF name, made unique)."""
    from pytfrt.compiler.frontends.tf import _variables

    captures = list(step.get_concrete_function().graph.captures)
    _, bound = _variables(tf, step.get_concrete_function().graph, captures)
    return {
        id(ext): bound[internal.op.name].resource.name
        for ext, internal in captures
        if internal.op.name in bound and bound[internal.op.name].resource is not None
    }


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_layer(tf: Any, name: str) -> None:
    import keras

    case = cases.CASES[name]
    model = cases.build(keras, name, case)
    step, _, trains = cases.step_function(tf, keras, model, case)
    xs = [cases.sample(kind, i) for i, kind in enumerate(case.inputs)]
    initial = [v.numpy().copy() for v in model.variables]
    if name in UNSUPPORTED:
        with pytest.raises(UnsupportedOpError):
            pytfrt.compile(step)
        return
    compiled = pytfrt.compile(step)
    ours = compiled(*xs)
    for v, value in zip(model.variables, initial, strict=True):
        v.assign(value)
    theirs = step(*xs)
    if not trains:
        ref = theirs.numpy()
        assert ours.dtype == ref.dtype and np.array_equal(ours, ref)
        return
    assert _rel(ours[0], theirs[0]) <= 1e-4, "inference output differs"
    assert _rel(ours[1], theirs[1]) <= 1e-4, "loss differs"
    trained = compiled.variables  # empty when the step writes none (no gradient reaches one)
    keys = _compiled_names(tf, step)
    scale = max([float(np.max(np.abs(v.numpy()))) for v in model.trainable_variables] or [1.0])
    for v, before in zip(model.variables, initial, strict=True):
        if not v.trainable:
            continue
        key = keys[id(v.value.handle)]
        err = float(np.max(np.abs(trained.get(key, before) - v.numpy()))) / scale
        assert err <= 1e-4, f"{v.path}: relative error {err:.3g} after one step"
