"""Third-party kernels through the ``pytfrt.kernels`` entry-point group (the in-repo plugin).

``tests/plugins/pytfrt_example_plugin`` is a separate distribution that ``make test`` installs;
it declares ``example = "pytfrt_example_plugin:register"`` and registers ``example.double.i32``.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from pytfrt.host import DiagnosticCollector, HostContext, KernelFrame, make_available
from pytfrt.host.kernel_libraries import ENTRY_POINT_GROUP, load_entry_point_kernels
from pytfrt.host.registry import KernelRegistry, RegistryError
from pytfrt.kernel_libraries import builtin_registry


def test_the_example_plugin_is_installed() -> None:
    eps = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert eps.get("example") == "pytfrt_example_plugin:register", (
        "install the fixture: pip install -e tests/plugins/pytfrt_example_plugin (make test does)"
    )


def test_load_entry_point_kernels_registers_the_plugin_kernel() -> None:
    registry = KernelRegistry()
    loaded = load_entry_point_kernels(registry)
    assert "example" in loaded
    entry = registry.get("example.double.i32")
    assert entry.fn(21) == 42


@pytest.mark.parametrize(("x", "expected"), [(21, 42), (-5, -10), (2**30, -(2**31))])
def test_builtin_registry_finds_the_plugin_and_the_kernel_runs(x: int, expected: int) -> None:
    diagnostics = DiagnosticCollector()
    host = HostContext(registry=builtin_registry(), diagnostic_handler=diagnostics)
    entry = host.registry.get("example.double.i32")
    frame = KernelFrame([make_available(x)], [], [], 1, host.new_execution_context())
    entry.invoke(frame)
    result = frame.results[0]
    assert result is not None and result.get() == expected  # i32 wrap-around, as in TFRT
    assert diagnostics.messages == []


def test_a_broken_entry_point_is_reported_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = importlib.metadata.EntryPoint(
        name="broken", value="pytfrt_no_such_plugin_module:register", group=ENTRY_POINT_GROUP
    )
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [broken])
    with pytest.raises(RegistryError, match="cannot load kernels from entry point 'broken'"):
        load_entry_point_kernels(KernelRegistry())


def test_the_entry_point_pre_scan_finds_a_declaring_distribution(tmp_path: Path) -> None:
    # Oracle: importlib.metadata itself, on the same directory.
    from pytfrt.host.kernel_libraries import may_declare_entry_points

    plain = tmp_path / "plain"
    (plain / "other-1.0.dist-info").mkdir(parents=True)
    (plain / "other-1.0.dist-info" / "entry_points.txt").write_text("[console_scripts]\nx = y:z\n")
    (plain / "other-1.0.dist-info" / "METADATA").write_text("Name: other\nVersion: 1.0\n")
    assert may_declare_entry_points(ENTRY_POINT_GROUP, [str(plain)]) is False
    found = [d for d in importlib.metadata.distributions(path=[str(plain)])
             if d.entry_points.select(group=ENTRY_POINT_GROUP)]
    assert found == []
    plugin = tmp_path / "plugin"
    (plugin / "kplug-1.0.dist-info").mkdir(parents=True)
    (plugin / "kplug-1.0.dist-info" / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nk = kplug:register\n")
    (plugin / "kplug-1.0.dist-info" / "METADATA").write_text("Name: kplug\nVersion: 1.0\n")
    assert may_declare_entry_points(ENTRY_POINT_GROUP, [str(plugin)]) is True
    found = [d for d in importlib.metadata.distributions(path=[str(plugin)])
             if d.entry_points.select(group=ENTRY_POINT_GROUP)]
    assert len(found) == 1
    # and the installed example plugin is seen on the real path
    assert may_declare_entry_points(ENTRY_POINT_GROUP) is True
