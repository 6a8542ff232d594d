"""lit configuration for pytfrt's tool tests (TFRT style: .mlir files with RUN/CHECK lines).

Substitutions: ``FileCheck`` -> the ``filecheck`` package, the tools by their TFRT names.
Before the run, every ``*.mlir`` file without ``no_bef_translation`` in its text is compiled
(TFRT's build rule ``tfrt_translate -mlir-to-bef``) into the build folder, next to the test's
other outputs (``build/lit/<dir>/Output/<file>.tmp.bef``, i.e. ``%t.bef``); RUN lines say
``%s.bef`` as TFRT's do, and ``%s.bef`` is substituted by that path.  BEF files older than
their source or than the compiler are deleted first, so a stale one is never run; a file that
does not translate is a lit error (the run fails, with the diagnostic).  Paths in programs are
relative to the repository root, which is the working directory of every test.
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
for var in ("HOME", "TMPDIR", "PYTHONHASHSEED", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
            "PYTFRT_WHOLE_FUNCTION", "PYTHONPATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"

filecheck = shutil.which("filecheck", path=config.environment["PATH"]) or "filecheck"
# First: the prebuilt BEF of the test file lives in the build folder (see _translate_all).
config.substitutions.append((r"%s\.bef", "%t.bef"))
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


def _bef_path(src: str) -> str:
    """Where the BEF of test ``src`` goes: lit's ``%t`` for that test, plus ``.bef``."""
    rel_dir = os.path.relpath(os.path.dirname(src), config.test_source_root)
    name = os.path.basename(src)
    return os.path.join(config.test_exec_root, rel_dir, "Output", name + ".tmp.bef")


def _translate_all() -> None:
    """Compile every translatable ``.mlir`` test into the build folder (cached by mtime).

    Stale BEF files (source or compiler newer) are deleted before anything runs, and so are
    BEF files left in the source tree by older versions of this configuration.  A file that
    does not translate is reported as a lit error.
    """
    from pytfrt.tools import tfrt_translate

    for dirpath, _, files in os.walk(config.test_source_root):
        for name in files:
            if not name.endswith(".mlir"):
                if name.endswith(".mlir.bef"):  # the old in-tree location
                    os.remove(os.path.join(dirpath, name))
                continue
            src = os.path.join(dirpath, name)
            dst = _bef_path(src)
            with open(src, encoding="utf-8") as fh:
                if "no_bef_translation" in fh.read():
                    continue
            if os.path.exists(dst):
                if os.path.getmtime(dst) >= max(os.path.getmtime(src), COMPILER_MTIME):
                    continue
                os.remove(dst)  # stale: never run an old BEF
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            rel = os.path.relpath(src, REPO_ROOT)
            try:
                tfrt_translate.translate_file_to_bef(rel, dst, cwd=REPO_ROOT)
            except Exception as exc:  # noqa: BLE001 - every failure is reported to lit
                lit_config.error(f"could not translate {rel} to BEF:\n{exc}")


_translate_all()
