"""lit configuration for pytfrt's tool tests (TFRT style: .mlir files with RUN/CHECK lines).

Substitutions: ``FileCheck`` -> the ``filecheck`` package, the tools by their TFRT names.
Before the run, every ``*.mlir`` file without ``no_bef_translation`` in its text gets a sibling
``<file>.mlir.bef`` (TFRT's build rule ``tfrt_translate -mlir-to-bef``), so RUN lines may use
``%s.bef`` unchanged.  Paths in programs are relative to the repository root, which is the
working directory of every test.
"""

# ruff: noqa: F821  (lit injects `config` and `lit_config`)
import os
import shutil
import sys

import lit.formats

config.name = "pytfrt"
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(config.test_source_root))
# Every test runs from the repository root (as TFRT's do), so program paths are root-relative.
config.test_format = lit.formats.ShTest(
    execute_external=False, preamble_commands=[f"cd {REPO_ROOT}"]
)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py"]
config.test_exec_root = os.path.join(REPO_ROOT, "build", "lit")

bin_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
for var in ("HOME", "TMPDIR", "PYTHONHASHSEED", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"

filecheck = shutil.which("filecheck", path=config.environment["PATH"]) or "filecheck"
config.substitutions.append(("FileCheck", filecheck))
# TFRT's reduced/tracing builds of the driver are the same tool in pytfrt.
config.substitutions.append(("bef_executor_lite", "bef_executor"))
config.substitutions.append(("bef_executor_debug_tracing", "bef_executor"))
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%repo", REPO_ROOT))


def _newest_mtime(*dirs: str) -> float:
    """The newest modification time of the ``.py`` files under ``dirs``."""
    newest = 0.0
    for top in dirs:
        for dirpath, _, files in os.walk(top):
            for name in files:
                if name.endswith(".py"):
                    newest = max(newest, os.path.getmtime(os.path.join(dirpath, name)))
    return newest


# A cached .bef is stale if the compiler (front end or BEF writer) changed after it was written.
COMPILER_MTIME = _newest_mtime(
    os.path.join(REPO_ROOT, "src", "pytfrt", "mlir"),
    os.path.join(REPO_ROOT, "src", "pytfrt", "bef"),
)


def _translate_all() -> None:
    """Write ``<file>.bef`` next to every translatable ``.mlir`` test (cached by mtime)."""
    try:
        from pytfrt.tools import tfrt_translate
    except ImportError:
        return
    if not hasattr(tfrt_translate, "translate_file_to_bef"):
        return
    for dirpath, _, files in os.walk(config.test_source_root):
        for name in files:
            if not name.endswith(".mlir"):
                continue
            src = os.path.join(dirpath, name)
            dst = src + ".bef"
            with open(src, encoding="utf-8") as fh:
                if "no_bef_translation" in fh.read():
                    continue
            if os.path.exists(dst) and os.path.getmtime(dst) >= max(
                os.path.getmtime(src), COMPILER_MTIME
            ):
                continue
            rel = os.path.relpath(src, REPO_ROOT)
            try:
                tfrt_translate.translate_file_to_bef(rel, dst, cwd=REPO_ROOT)
            except Exception as exc:  # noqa: BLE001 - the test itself will report it
                lit_config.note(f"could not translate {rel}: {exc}")


_translate_all()
