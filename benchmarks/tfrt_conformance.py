"""Run TFRT's own lit test files, unchanged, against pytfrt and report which pass.

Usage::

    .venv/bin/python benchmarks/tfrt_conformance.py ROOT [--json OUT] [--filter REGEX]
        [--manifest FILE]

``ROOT`` is a directory laid out like a TFRT checkout (``mlir_tests/``,
``backends/cpu/mlir_tests/``, ``integrationtest/``) holding TFRT's test files as published
(this script never ships or edits them).  The script does what TFRT's build does before lit
runs, then runs lit the way ``tests/lit`` runs pytfrt's own suite:

* every ``.mlir`` except TFRT's ``no_bef_translation`` list is compiled with
  ``tfrt_translate -mlir-to-bef`` to ``<file>.mlir.bef`` (``%s.bef``) and ``<file>.bef``
  (what the older ``$(bef_name %s)`` spelling names); a file that does not translate is
  reported, and its test fails on the missing BEF;
* TFRT's BTF test data (MNIST weights, matmul and max-pool fixtures) cannot be downloaded, so
  well-formed random stand-ins with NumPy-computed expected values are written into ROOT
  (``examples/mnist/make_data.py`` for the integration programs);
* a ``lit.cfg.py`` is written into ROOT: tool names as TFRT's, ``bef_executor_lite`` and
  ``bef_executor_debug_tracing`` mapped to pytfrt's single driver, a ``bef_name`` helper, and
  ROOT as every test's working directory (TFRT programs name data files relative to it).

It prints one line per file and the totals, and writes them as JSON with ``--json``.

``--manifest FILE`` pins the set to one TFRT revision: FILE lists, one per line, a test file's
path, the commit of the stored version it holds, ``at`` (stored at the pinned revision) or
``older`` (the revision left it unchanged), its length in characters and its SHA-256.  Before
anything runs, every listed file must be in ROOT with that hash and ROOT must hold no other
``.mlir`` file; otherwise the script names the differences and stops (exit status 2).  It never
downloads anything: docs/conformance.md says how the pinned set was fetched.
``benchmarks/tfrt_manifest_de22adc4.txt`` and ``benchmarks/tfrt_manifest_main_4ecc3a44.txt``
are the manifests of the sets measured there.  ``--tfrt-revision`` sets
``PYTFRT_TFRT_REVISION`` (``de22adc4`` for the older set: where TFRT's revisions disagree,
pytfrt behaves as its main branch unless told otherwise).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Files TFRT's BUILD rules do not translate to BEF (they are invalid on purpose, or only fed to
# tfrt_opt / tfrt_translate).
NO_BEF_TRANSLATION = {
    "mlir_tests/basic_kernels/kernel_errors.mlir",
    "mlir_tests/tensor/kernel_errors.mlir",
    "mlir_tests/core_runtime/opt_err.mlir",
    "mlir_tests/compiler/opt_err.mlir",
    "mlir_tests/compiler/merge_chains.mlir",
    "mlir_tests/mlir_to_bef/err.mlir",
}

LIT_CFG = """\
# Written by pytfrt's benchmarks/tfrt_conformance.py: runs TFRT's test files against pytfrt.
# ruff: noqa
import os
import lit.formats

config.name = "tfrt-conformance"
config.test_source_root = {root!r}
config.test_exec_root = {exec_root!r}
# TFRT's RUN lines use the external shell (``$(bef_name %s)``).
config.test_format = lit.formats.ShTest(
    execute_external=True, force_execute_external=True, preamble_commands=["cd {root}"]
)
config.suffixes = [".mlir"]
config.excludes = ["test_data", "lit.cfg.py"]
config.environment["PATH"] = {path!r}
for var in ("HOME", "TMPDIR", "PYTHONHASHSEED", "PYTHONPATH", "PYTFRT_TFRT_REVISION"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
config.substitutions.append(("FileCheck", {filecheck!r}))
config.substitutions.append(("bef_executor_lite", "bef_executor"))
config.substitutions.append(("bef_executor_debug_tracing", "bef_executor"))
"""

# The filecheck package has no ``--dump-input-filter``; it only affects what a failure shows.
FILECHECK = """#!/bin/sh
for a in "$@"; do
  shift
  case "$a" in --dump-input-filter=*|-dump-input-filter=*) ;; *) set -- "$@" "$a" ;; esac
done
exec {filecheck} "$@"
"""

# LLVM's `not`: succeed exactly when the command fails.
NOT = """#!/bin/sh
"$@" && exit 1
exit 0
"""

BEF_NAME = """#!/bin/sh
# TFRT's bef_name: the BEF file built from an MLIR test file.
case "$1" in *.mlir) echo "${1%.mlir}.bef" ;; *) echo "$1.bef" ;; esac
"""


def translate_all(root: Path) -> list[tuple[str, str]]:
    """Write ``<f>.mlir.bef`` and ``<f>.bef`` for every translatable test; return failures."""
    from pytfrt.tools.tfrt_translate import translate_file_to_bef

    failures = []
    for src in sorted(root.rglob("*.mlir")):
        rel = src.relative_to(root).as_posix()
        if rel in NO_BEF_TRANSLATION:
            continue
        for stale in (Path(f"{src}.bef"), src.with_suffix(".bef")):
            stale.unlink(missing_ok=True)
        try:
            translate_file_to_bef(rel, f"{src}.bef", cwd=str(root))
        except Exception as exc:  # noqa: BLE001 - reported per file, the test then fails
            failures.append((rel, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
            continue
        shutil.copyfile(f"{src}.bef", src.with_suffix(".bef"))
    return failures


def make_test_data(root: Path) -> None:
    """Write stand-ins for TFRT's BTF fixtures (random, well-formed, expected values by NumPy)."""
    import numpy as np

    from pytfrt.tensor.btf import write_btf

    sys.path.insert(0, str(REPO / "examples" / "mnist"))
    import make_data  # type: ignore[import-not-found]

    rng = np.random.default_rng(2020)
    mnist = root / "backends/cpu/mlir_tests/mnist/test_data"
    mnist.mkdir(parents=True, exist_ok=True)
    write_btf(
        mnist / "test_tensor.btf",
        [np.array([[1, 2], [3, 4]], np.int32), np.arange(5, dtype=np.int32), np.zeros(0, np.int32)],
    )
    a = rng.integers(-9, 10, size=(6, 8)).astype(np.int32)
    b = rng.integers(-9, 10, size=(8, 7)).astype(np.int32)
    write_btf(mnist / "matmul_test_i32.btf", [a, b, a @ b])
    fa = rng.uniform(-1, 1, size=(6, 8)).astype(np.float32)
    fb = rng.uniform(-1, 1, size=(8, 7)).astype(np.float32)
    write_btf(mnist / "matmul_test_f32.btf", [fa, fb, fa @ fb])
    resnet = root / "backends/cpu/mlir_tests/resnet/test_data"
    resnet.mkdir(parents=True, exist_ok=True)
    x0 = rng.uniform(-1, 1, size=(2, 3, 3, 6)).astype(np.float32)
    x1 = rng.uniform(-1, 1, size=(2, 5, 5, 6)).astype(np.float32)
    tiny = float(np.finfo(np.float32).tiny)  # tfrt_test.max_pooling_2d's floor
    write_btf(
        resnet / "max_pool.btf",
        [
            x0,
            make_data.max_pool_nhwc(x0, 3, 3, "valid", tiny),
            x1,
            make_data.max_pool_nhwc(x1, 3, 2, "same", tiny),
        ],
    )
    make_data.write_all(root / "integrationtest/mnist/test_data")


def read_manifest(path: Path) -> tuple[str, dict[str, str]]:
    """``(revision, {path: sha256})`` of a manifest; the revision is named by its header."""
    revision, files = "", {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("#"):
            found = re.search(r"tensorflow/runtime@([0-9a-f]{40})", line)
            revision = found.group(1) if found and not revision else revision
            continue
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 5 or not re.fullmatch(r"[0-9a-f]{64}", fields[4]):
            raise SystemExit(f"{path}:{n}: expected 'path commit at|older chars sha256'")
        files[fields[0]] = fields[4]
    if not files:
        raise SystemExit(f"{path}: lists no files")
    return revision, files


def verify_manifest(root: Path, manifest: Path) -> str:
    """Check ROOT's test files against the manifest; return the revision or stop with the list
    of missing, changed and extra files."""
    revision, files = read_manifest(manifest)
    problems = []
    for rel, digest in sorted(files.items()):
        f = root / rel
        if not f.is_file():
            problems.append(f"missing: {rel}")
        elif hashlib.sha256(f.read_bytes()).hexdigest() != digest:
            problems.append(f"changed: {rel}")
    present = {p.relative_to(root).as_posix() for p in root.rglob("*.mlir")}
    problems += [f"not in the manifest: {rel}" for rel in sorted(present - set(files))]
    if problems:
        print(f"{root} is not the set of {manifest}:", *problems, sep="\n  ")
        raise SystemExit(2)
    print(f"manifest: {len(files)} files of tensorflow/runtime@{revision[:12]} verified")
    return revision


def run_lit(root: Path, filt: str | None) -> dict[str, tuple[bool, str]]:
    bin_dir = Path(sys.executable).parent
    tools = Path(tempfile.mkdtemp(prefix="tfrt_conformance_bin_"))
    for tool, text in (("bef_name", BEF_NAME), ("not", NOT)):
        (tools / tool).write_text(text)
        (tools / tool).chmod(0o755)
    path = os.pathsep.join([str(tools), str(bin_dir), os.environ.get("PATH", "")])
    real_filecheck = shutil.which("filecheck", path=path) or "filecheck"
    filecheck = tools / "FileCheck"
    filecheck.write_text(FILECHECK.format(filecheck=real_filecheck))
    filecheck.chmod(0o755)
    exec_root = Path(tempfile.mkdtemp(prefix="tfrt_conformance_out_"))
    (root / "lit.cfg.py").write_text(
        LIT_CFG.format(
            root=str(root), exec_root=str(exec_root), path=path, filecheck=str(filecheck)
        )
    )
    xml = exec_root / "lit.xml"
    cmd = [
        str(bin_dir / "lit"),
        "-j",
        str(max(2, os.cpu_count() or 2)),
        f"--xunit-xml-output={xml}",
        str(root),
    ]
    if filt:
        cmd.insert(1, f"--filter={filt}")
    proc = subprocess.run(
        cmd, cwd=root, capture_output=True, text=True, env=dict(os.environ, PATH=path)
    )
    results: dict[str, tuple[bool, str]] = {}
    if not xml.exists():
        raise SystemExit(f"lit did not run:\n{proc.stdout}\n{proc.stderr}")
    for case in ET.parse(xml).getroot().iter("testcase"):
        classname = case.get("classname", "")
        rel_dir = classname.split(".", 1)[1].replace(".", "/") if "." in classname else ""
        name = f"{rel_dir}/{case.get('name')}" if rel_dir else str(case.get("name"))
        if case.find("skipped") is not None:
            continue  # excluded by --filter
        failure = case.find("failure")
        results[name] = (failure is None, (failure.text or "") if failure is not None else "")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="directory laid out like a TFRT checkout")
    parser.add_argument("--json", type=Path, help="write the per-file results here")
    parser.add_argument("--filter", help="only files whose path matches this regex")
    parser.add_argument("-v", "--verbose", action="store_true", help="print failure output")
    parser.add_argument(
        "--manifest", type=Path, help="check ROOT against this pinned set before running"
    )
    parser.add_argument(
        "--tfrt-revision", choices=("main", "de22adc4"),
        help="PYTFRT_TFRT_REVISION for the translation and every tool run (default: as set, "
             "else main): which TFRT to behave as where its revisions disagree",
    )
    args = parser.parse_args(argv)
    if args.tfrt_revision:
        os.environ["PYTFRT_TFRT_REVISION"] = args.tfrt_revision
    root = args.root.resolve()
    revision = verify_manifest(root, args.manifest) if args.manifest else None
    make_test_data(root)
    bad = translate_all(root)
    for rel, why in bad:
        print(f"translation failed: {rel}: {why}")
    results = run_lit(root, args.filter)
    passed = sum(ok for ok, _ in results.values())
    for name in sorted(results):
        ok, text = results[name]
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
        if args.verbose and not ok:
            print(re.sub(r"(?m)^", "      ", text[-3000:]))
    print(f"{passed} passed, {len(results) - passed} failed")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "revision": revision,
                    "passed": passed,
                    "total": len(results),
                    "results": {
                        k: {"ok": ok, "output": t[-4000:]} for k, (ok, t) in results.items()
                    },
                    "translation_failures": dict(bad),
                },
                indent=1,
            )
        )
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
