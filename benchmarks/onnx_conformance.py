"""ONNX's backend node suite on pytfrt and ONNX Runtime, in the same run.

Every node test case that the installed ``onnx`` ships (``onnx/backend/test/data/node``: one
model and one or more data sets of inputs and expected outputs) is run through
``pytfrt.onnx_backend`` and through ONNX Runtime's CPU provider, and both are compared with the
expected outputs the way ONNX's own runner compares (``onnx.backend.test.runner``): output
count, shape, dtype, then ``assert_allclose(rtol=1e-3, atol=1e-5)`` (strings and bools exact,
bfloat16 with two ulps).  Each pytfrt case ends as one of

* ``pass``;
* ``wrong`` -- ran and returned a different answer (the bar is zero of these);
* ``unsupported`` -- a clear ``UnsupportedOpError`` at prepare or first run;
* ``error:<Type>`` -- any other exception (also a bar of zero).

Prints the figures (pytfrt passes / ORT passes / pytfrt passes among the cases ORT passes,
wrong answers, errors by kind), writes ``benchmarks/results/onnx_conformance.json`` (every case
with its outcome and message) and a PNG bar chart next to it.

    python benchmarks/onnx_conformance.py [-k SUBSTRING] [--out NAME] [--no-plot]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def node_cases(substring: str = "") -> list[Any]:
    """ONNX's node test cases (``onnx.backend.test.loader``), optionally filtered by name."""
    from onnx.backend.test.loader import load_model_tests

    return [c for c in load_model_tests(kind="node") if substring in c.name]


def load_data_sets(case: Any) -> list[tuple[list[Any], list[Any]]]:
    """``[(inputs, expected_outputs)]`` of a case, as ONNX's runner normalises them."""
    from onnx.backend.test.runner import _normalize_tensor

    return [([_normalize_tensor(x) for x in ins], [_normalize_tensor(x) for x in outs])
            for ins, outs in case.data_sets]


def compare(expected: list[Any], got: Any, rtol: float, atol: float) -> None:
    """ONNX's runner comparison (raises ``AssertionError`` on a difference).  A sequence
    output is compared element by element, each element as one output: the runner itself
    recurses into a sequence treating each element as a list of outputs, which fails
    (``TypeError``) on rank-0 elements whatever the answer."""
    from onnx.backend.test.runner import Runner

    got = list(got)
    if len(got) != len(expected):
        raise AssertionError(f"{len(got)} outputs, expected {len(expected)}")
    for e, g in zip(expected, got, strict=True):
        if isinstance(e, list | tuple):
            if not isinstance(g, list | tuple) or len(g) != len(e):
                raise AssertionError(f"a sequence of {len(e)} expected, got {type(g).__name__}")
            for ee, gg in zip(e, g, strict=True):
                Runner.assert_similar_outputs([ee], [gg], rtol=rtol, atol=atol)
        else:
            Runner.assert_similar_outputs([e], [g], rtol=rtol, atol=atol)


def _run_pytfrt(model: Any, sets: list[Any], rtol: float, atol: float) -> tuple[str, str]:
    from pytfrt import onnx_backend
    from pytfrt.compiler.errors import UnsupportedOpError

    try:
        rep = onnx_backend.prepare(model)
        for inputs, expected in sets:
            got = rep.run(inputs)
            try:
                compare(expected, got, rtol, atol)
            except (AssertionError, TypeError) as exc:
                return "wrong", str(exc).strip().splitlines()[0][:300] if str(exc) else "mismatch"
    except UnsupportedOpError as exc:
        return "unsupported", str(exc)[:300]
    except Exception as exc:  # noqa: BLE001 - every failure is classified
        tb = traceback.extract_tb(exc.__traceback__)
        where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
        return f"error:{type(exc).__name__}", f"{exc!s:.250} [{where}]"
    return "pass", ""


def _run_ort(model: Any, sets: list[Any], rtol: float, atol: float) -> tuple[str, str]:
    import onnxruntime as ort

    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        for inputs, expected in sets:
            got = sess.run(None, dict(zip(names, inputs, strict=False)))
            try:
                compare(expected, got, rtol, atol)
            except (AssertionError, TypeError) as exc:
                return "wrong", str(exc).strip().splitlines()[0][:300] if str(exc) else "mismatch"
    except Exception as exc:  # noqa: BLE001
        return f"error:{type(exc).__name__}", str(exc)[:300]
    return "pass", ""


def run(substring: str = "", ort: bool = True) -> dict[str, Any]:
    """Run every case on pytfrt (and ORT); the per-case outcomes and the totals."""
    import warnings

    cases = []
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        all_cases = node_cases(substring)
    for case in all_cases:
        model = case.model
        sets = load_data_sets(case)
        t = time.perf_counter()
        p, p_msg = _run_pytfrt(model, sets, case.rtol, case.atol)
        dt = time.perf_counter() - t
        o, o_msg = _run_ort(model, sets, case.rtol, case.atol) if ort else ("skipped", "")
        cases.append({"name": case.name, "pytfrt": p, "pytfrt_msg": p_msg, "ort": o,
                      "ort_msg": o_msg, "seconds": round(dt, 4)})
    return {"cases": cases, "totals": totals(cases), "seconds": time.perf_counter() - t0}


def totals(cases: list[dict[str, Any]]) -> dict[str, Any]:
    ort_pass = [c for c in cases if c["ort"] == "pass"]
    kinds = collections.Counter(c["pytfrt"] for c in cases if c["pytfrt"] != "pass")
    kinds_ort = collections.Counter(c["pytfrt"] for c in ort_pass if c["pytfrt"] != "pass")
    both = sum(c["pytfrt"] == "pass" for c in ort_pass)
    return {
        "cases": len(cases),
        "pytfrt_pass": sum(c["pytfrt"] == "pass" for c in cases),
        "ort_pass": len(ort_pass),
        "pytfrt_pass_of_ort_pass": both,
        "ratio_of_ort": round(both / len(ort_pass), 4) if ort_pass else None,
        "wrong": kinds.get("wrong", 0),
        "failures_by_kind": dict(kinds.most_common()),
        "failures_by_kind_where_ort_passes": dict(kinds_ort.most_common()),
    }


RUNNER_LIMITS = {
    "test_loop16_seq_none": "runner: ONNX's runner cannot compare a sequence of rank-0 tensors "
    "(TypeError whatever the answer); benchmarks/onnx_conformance.py compares it element by "
    "element and it passes",
}
"""Cases that fail under ONNX's own runner (the node-suite test) whatever the answer."""


def write_xfail(result: dict[str, Any], path: Path) -> None:
    """The expected-failure list: ``name<TAB>outcome: message`` per failing pytfrt case, and
    the :data:`RUNNER_LIMITS` cases."""
    lines = ["# ONNX node cases pytfrt is expected to fail, with the reason (generated by",
             "# benchmarks/onnx_conformance.py --write-xfail; see test_onnx_backend_suite.py)"]
    for c in sorted(result["cases"], key=lambda c: c["name"]):
        if c["name"] in RUNNER_LIMITS:
            lines.append(f"{c['name']}\t{RUNNER_LIMITS[c['name']]}")
        elif c["pytfrt"] != "pass":
            msg = " ".join(c["pytfrt_msg"].split())[:200]
            lines.append(f"{c['name']}\t{c['pytfrt']}: {msg}")
    path.write_text("\n".join(lines) + "\n")
    print("wrote", path, f"({len(lines) - 2} expected failures)")


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = result["totals"]
    labels = ["cases", "ORT passes", "pytfrt passes", "pytfrt passes\n(of ORT's)", "wrong"]
    values = [t["cases"], t["ort_pass"], t["pytfrt_pass"], t["pytfrt_pass_of_ort_pass"],
              t["wrong"]]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    bars = ax.bar(labels, values, color=["#999", "#4a7", "#47a", "#36c", "#c33"])
    ax.bar_label(bars)
    ax.set_title("ONNX backend node suite: pytfrt vs ONNX Runtime (same run)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", default="", help="only cases whose name contains this")
    ap.add_argument("--out", default="onnx_conformance", help="result file stem")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--no-ort", action="store_true", help="skip ONNX Runtime")
    ap.add_argument("--show", default="", help="list pytfrt cases of this outcome prefix")
    ap.add_argument("--write-xfail", default="", metavar="FILE",
                    help="write the cases pytfrt fails, with the reason, to FILE (the "
                         "expected-failure list of the node-suite test)")
    args = ap.parse_args(argv)
    import onnx

    result = run(args.k, ort=not args.no_ort)
    result["env"] = {"onnx": onnx.__version__, "python": platform.python_version(),
                     "load": os.getloadavg()}
    try:
        import onnxruntime

        result["env"]["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        pass
    t = result["totals"]
    print(f"{t['cases']} node cases, {result['seconds']:.0f} s (load {os.getloadavg()[0]:.1f})")
    print(f"ONNX Runtime passes {t['ort_pass']}; pytfrt passes {t['pytfrt_pass']} "
          f"({t['pytfrt_pass_of_ort_pass']} of ORT's {t['ort_pass']} = "
          f"{100 * (t['ratio_of_ort'] or 0):.1f}%); wrong answers: {t['wrong']}")
    print("pytfrt failures by kind:", json.dumps(t["failures_by_kind"]))
    print("... among the cases ORT passes:", json.dumps(t["failures_by_kind_where_ort_passes"]))
    if args.show:
        for c in result["cases"]:
            if c["pytfrt"].startswith(args.show):
                print(f"  {c['name']}: {c['pytfrt']} (ORT {c['ort']}) {c['pytfrt_msg']}")
    if args.write_xfail:
        write_xfail(result, Path(args.write_xfail))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{args.out}.json"
    out.write_text(json.dumps(result, indent=1))
    print("wrote", out)
    if not args.no_plot:
        plot(result, RESULTS / f"{args.out}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
