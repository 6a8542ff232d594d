"""Shared pytest configuration: Hypothesis profiles, and read-only kernel operands.

Every graph kernel runs on read-only views of its operands in every test
(``PYTFRT_READONLY_OPERANDS``, ``docs/config.md``; set here, before any test builds the runtime
table): a kernel that writes an input fails the test that reaches it
(``tests/robustness/test_robust_readonly.py``).  Child processes inherit it.

A run of the whole suite also checks that it *reached* every kernel of the runtime table that
way: each process (the pytest workers, and the ``bef_executor``/CLI/server processes tests start)
records the kernels it ran (``PYTFRT_READONLY_REACHED``), and at the end the session fails if a
kernel was never run and is not listed, with its reason, in
``tests/robustness/readonly_unreached.txt`` -- or if a listed kernel was run after all (the
list stays exact).  Partial runs (paths, ``-k``, ``-m``, ``--lf``, deselection,
``--collect-only``) skip the check.

* ``dev`` (default): random examples, a modest count, so a local run stays fast.
* ``ci`` (selected when the ``CI`` environment variable is set): derandomized, so a CI failure
  reproduces exactly; no deadline (shared CI machines are noisy).

Select one explicitly with ``HYPOTHESIS_PROFILE=<name>``.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("PYTFRT_READONLY_OPERANDS", "1")

UNREACHED_LIST = pathlib.Path(__file__).parent / "robustness" / "readonly_unreached.txt"

settings.register_profile(
    "dev",
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci",
    max_examples=50,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
_default_profile = "ci" if os.environ.get("CI") else "dev"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or _default_profile)


# -- every kernel reached on read-only operands ------------------------------------------------

_MADE_DIR: list[str] = []  # the directory this (controlling) process made, removed at the end


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and not os.environ.get("PYTFRT_READONLY_REACHED"):
        # before the xdist workers start: they and every process a test starts inherit it
        _MADE_DIR.append(tempfile.mkdtemp(prefix="pytfrt-reached-"))
        os.environ["PYTFRT_READONLY_REACHED"] = _MADE_DIR[0]


def pytest_unconfigure(config: pytest.Config) -> None:
    for d in _MADE_DIR:
        shutil.rmtree(d, ignore_errors=True)


def _whole_suite(config: pytest.Config) -> bool:
    opt = config.option
    return (config.args_source is pytest.Config.ArgsSource.TESTPATHS
            and not opt.keyword and not opt.markexpr and not opt.deselect
            and not getattr(opt, "lf", False) and not opt.collectonly
            and os.environ.get("PYTFRT_READONLY_OPERANDS") == "1")


def read_unreached_list(path: pathlib.Path = UNREACHED_LIST) -> dict[str, str]:
    """``kernel: reason`` lines of the list (``#`` comments and blank lines skipped)."""
    out: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, reason = line.partition(":")
            out[name.strip()] = reason.strip()
    return out


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from pytfrt.backends.cpu import graph_kernels

    directory = os.environ.get("PYTFRT_READONLY_REACHED")
    if not directory:
        return
    graph_kernels.write_reached_kernels(directory)  # this process (a worker or the only one)
    if hasattr(session.config, "workerinput") or exitstatus != 0 \
            or not _whole_suite(session.config):
        return
    reached: set[str] = set()
    for f in pathlib.Path(directory).glob("*.txt"):
        reached.update(f.read_text(encoding="utf-8").split())
    table = graph_kernels.graph_ops()
    kernels = {name for name, fn in table.items() if getattr(fn, "__pytfrt_readonly__", False)}
    listed = read_unreached_list()
    problems = [f"{name}: never run by the suite (test it, or list it with a reason in "
                f"{UNREACHED_LIST.name})" for name in sorted(kernels - reached - set(listed))]
    problems += [f"{name}: listed in {UNREACHED_LIST.name} but run by the suite (remove it)"
                 for name in sorted(set(listed) & reached)]
    problems += [f"{name}: listed in {UNREACHED_LIST.name} but not a kernel of the table"
                 for name in sorted(set(listed) - kernels)]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", "kernels run on read-only operands", bold=True)
        reporter.write_line(f"{len(kernels & reached)} of {len(kernels)} kernels run, "
                            f"{len(kernels & set(listed))} listed as not reached")
        for p in problems:
            reporter.write_line(f"FAILED {p}", red=True)
    if problems:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
