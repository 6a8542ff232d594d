"""The import graph of ``src/pytfrt`` has no cycles, except registration by import.

The graph is built from the AST (nothing is imported), with the same import finder as the
layering test (``tests/unit/test_layering.py``): every ``import``/``from ... import`` at module
level or inside functions, imports by name (``import_module("...")``, lazy tables of module
names), top-level modules.  ``TYPE_CHECKING`` imports do not run and are left out.  An edge
goes from a module to the deepest module an import names (``from pkg import sub`` -> ``pkg.sub``;
``from pkg import name`` -> ``pkg``); the parent packages that Python also runs are not edges,
so a package ``__init__`` re-exporting its modules does not make every module a cycle, and
importing the root package ``pytfrt`` (which runs before any module) is no edge.

Allowed: the edges in :data:`REGISTRATION`, each a registry module importing (or naming, in a
lazy table) the modules that register into it or implement its interface (their own import of
the registry closes the loop).  Every such edge must
still exist and still close a cycle, so the list cannot go stale.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import test_layering as L  # tests/unit is on the path (pytest's rootdir insertion)

_TF = "pytfrt.compiler.frontends."
REGISTRATION: dict[tuple[str, str], str] = {
    **{
        (_TF + "tf_registry", _TF + m): "the TF op table imports the handler modules, which "
        "register with @tf_op"
        for m in ("tf_array_ops", "tf_complex", "tf_control", "tf_grad", "tf_graph", "tf_lists",
                  "tf_ops", "tf_random", "tf_state", "tf_strings", "tf_volume")
    },
    **{
        (_TF + "onnx_mapping", _TF + m): "the ONNX op table imports the handler modules, which "
        "register with @onnx_op"
        for m in ("onnx_control", "onnx_recurrent", "onnx_more", "onnx_quant", "onnx_nd",
                  "onnx_sequence", "onnx_text", "onnx_training")
    },
    ("pytfrt.kernel_libraries", "pytfrt.distributed.kernels"): "a built-in kernel library, "
    "named for lazy registration (BUILTIN_LIBRARIES)",
    **{
        ("pytfrt.backends.cpu.graph_kernels", f"pytfrt.backends.cpu.{m}"): "a module of the "
        "runtime op table, named for registration (COMPUTE_MODULES); its kernel runs a region's "
        "ops through the table"
        for m in ("small_graph", "shape_plan")
    },
    **{
        ("pytfrt.serving.servable", f"pytfrt.serving.{m}_backend"): "a serving backend, named "
        "in the backend table (BACKENDS); it implements the servable interface"
        for m in ("pytfrt", "tf", "ort")
    },
    **{
        ("pytfrt.tools.bench", f"pytfrt.tools.bench_{m}"): "a `pytfrt bench` subcommand, named "
        "in the subcommand table; it uses the bench helpers"
        for m in ("models", "nqueens", "serve")
    },
}
"""``(importer, imported)``: the allowed back edges, each with its reason."""


def _resolve(name: str, modules: set[str]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _module_of(imp_module: str, names: set[str]) -> str | None:
    return _resolve(imp_module, names) if imp_module.startswith("pytfrt") else None


def edges_of(path: Path, name: str, names: set[str]) -> set[str]:
    """The modules ``name`` imports: ``from X import a`` names ``X.a`` if that is a module,
    else ``X``; ``TYPE_CHECKING`` blocks left out; imports by name from the layering test."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and L._is_type_checking(node.test):
            for stmt in node.body:
                skip.update(id(n) for n in ast.walk(stmt))
    targets: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                base_name = ".".join(base + ([node.module] if node.module else []))
            else:
                base_name = node.module or ""
            subs = [f"{base_name}.{a.name}" for a in node.names
                    if f"{base_name}.{a.name}" in names]
            targets.update(subs)
            if len(subs) < len(node.names):
                targets.add(base_name)
    targets.update(imp.module for imp in L.imports_of(path, name) if imp.by_name)
    found = {_module_of(t, names) for t in targets}
    # The root package runs before any of its modules anyway: importing it is no edge.
    return {t for t in found if t is not None and t != name and t != "pytfrt"}


def import_graph() -> dict[str, set[str]]:
    """Module -> the ``pytfrt`` modules it imports (see the module docstring)."""
    modules = {L.module_name(p): p for p in L.MODULES}
    # Extension modules (``_eager_fast``: a .so with a .pyi) are modules too, with no edges.
    names = set(modules) | {L.module_name(p) for p in L.PKG.rglob("*.pyi")}
    return {name: edges_of(path, name, names) for name, path in modules.items()}


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


GRAPH = import_graph()


def test_no_import_cycles_but_registration() -> None:
    pruned = {m: {t for t in ts if (m, t) not in REGISTRATION} for m, ts in GRAPH.items()}
    found = cycles(pruned)
    detail = [
        "\n  ".join(f"{m} -> {sorted(pruned[m] & set(c))}" for m in c) for c in found
    ]
    assert found == [], "import cycles in src/pytfrt:\n  " + "\n\n  ".join(detail)


def test_every_allowed_edge_exists_and_closes_a_cycle() -> None:
    components = cycles(GRAPH)
    for (src, dst), reason in REGISTRATION.items():
        assert dst in GRAPH.get(src, set()), f"stale allowed edge {src} -> {dst} ({reason})"
        assert any(src in c and dst in c for c in components), (
            f"allowed edge {src} -> {dst} no longer closes a cycle: remove it ({reason})"
        )


def test_the_cycle_finder_sees_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"x": {"y"}, "y": set()}) == []


def test_the_graph_sees_function_level_and_by_name_imports() -> None:
    # Known edges of each kind, from the real source.
    assert "pytfrt.compiler.autodiff_control" in GRAPH["pytfrt.function"]  # in a function
    assert "pytfrt.compiler.api" in GRAPH["pytfrt"]  # PEP 562 table, by name
    assert "pytfrt.kernels.basic" in GRAPH["pytfrt.kernel_libraries"]  # lazy library, by name
