"""The kernel registry and ``@kernel``: binding roles, results, errors, modules, lazy libraries."""

from __future__ import annotations

import sys
import textwrap
import threading
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytfrt.host import (
    CHAIN,
    AsyncValue,
    Attr,
    DiagnosticCollector,
    ExecutionContext,
    Function,
    HostContext,
    KernelError,
    KernelFrame,
    KernelKind,
    KernelRegistry,
    RegistryError,
    RemainingAttrs,
    RemainingFunctions,
    kernel,
    make_available,
    make_error,
    make_unconstructed,
)
from pytfrt.host.kernel_libraries import load_kernels
from pytfrt.support.errors import ErrorCode, Status
from pytfrt.support.location import FileLineColLoc

# Errors a kernel reports carry TFRT's default code for them (``EmitErrorAsync``: INTERNAL on
# TFRT's main branch; test_host_context checks the de22adc4 revision's Unknown).
KERNEL_ERROR = ErrorCode.INTERNAL


class NamedFunction(Function):
    """A stand-in BEF function: only its name matters to the binding tests."""

    def __init__(self, name: str) -> None:
        self.name = name


LOC = FileLineColLoc("kernels.mlir", 12, 5)


class Harness:
    """A host with a diagnostic collector and a registry, and a way to invoke one kernel."""

    def __init__(self) -> None:
        self.diagnostics = DiagnosticCollector()
        self.host = HostContext(diagnostic_handler=self.diagnostics)
        self.registry = self.host.registry

    def invoke(
        self,
        fn: Any,
        args: Sequence[Any] = (),
        attrs: Sequence[Any] = (),
        funcs: Sequence[Function] = (),
        num_results: int = 1,
    ) -> KernelFrame:
        """Register ``fn`` (if needed) and run it on a fresh frame; returns the frame."""
        name = fn.__pytfrt_kernels__[0][0]
        if name not in self.registry:
            self.registry.add(fn)
        arguments = [a if isinstance(a, AsyncValue) else make_available(a) for a in args]
        frame = KernelFrame(
            arguments, list(attrs), list(funcs), num_results,
            self.host.new_execution_context(), LOC, name,
        )
        self.registry.get(name).invoke(frame)
        return frame


@pytest.fixture
def h() -> Harness:
    return Harness()


def values(frame: KernelFrame) -> list[Any]:
    out = []
    for r in frame.results:
        assert r is not None, "result slot left empty"
        out.append(r.error if r.is_error() else r.get())
    return out


# -- binding roles -----------------------------------------------------------------------------


def test_plain_arguments_bind_payloads_in_order(h: Harness) -> None:
    @kernel("t.sub.i32")
    def sub(a: int, b: int) -> int:
        return a - b

    assert values(h.invoke(sub, [10, 3])) == [7]
    assert sub(5, 1) == 4  # the decorator returns the function unchanged


def test_async_value_arguments_bind_the_value_itself(h: Harness) -> None:
    @kernel("t.alias")
    def alias(x: AsyncValue[int]) -> AsyncValue[int]:
        return x

    arg = make_available(3)
    frame = h.invoke(alias, [arg])
    assert frame.results[0] is arg  # returned AsyncValues are stored as is


def test_varargs_bind_remaining_payloads_or_values(h: Harness) -> None:
    @kernel("t.sum")
    def total(first: int, *rest: int) -> int:
        return first * 100 + sum(rest)

    @kernel("t.count_avs")
    def count(*avs: AsyncValue[Any]) -> int:
        assert all(isinstance(a, AsyncValue) for a in avs)
        return len(avs)

    assert values(h.invoke(total, [1, 2, 3, 4])) == [109]
    assert values(h.invoke(total, [1])) == [100]
    assert values(h.invoke(count, [1, 2, 3])) == [3]


def test_attributes_bind_in_frame_order_and_remaining_attrs(h: Harness) -> None:
    @kernel("t.attrs")
    def attrs(x: int, a: Attr[int], b: Attr[str], rest: RemainingAttrs) -> tuple[Any, ...]:
        return (x, a, b, rest)

    frame = h.invoke(attrs, [1], attrs=[2, "s", 3.5, [4]])
    assert values(frame) == [(1, 2, "s", [3.5, [4]])]


def test_missing_attribute_is_reported(h: Harness) -> None:
    @kernel("t.needs_attr")
    def needs(a: Attr[int]) -> int:
        return a

    frame = h.invoke(needs, [], attrs=[])
    assert values(frame) == [Status("kernel 't.needs_attr' is missing an attribute", KERNEL_ERROR)]


def test_functions_bind_in_their_own_list(h: Harness) -> None:
    @kernel("t.funcs")
    def funcs(
        x: int, first: Function, a: Attr[int], rest: RemainingFunctions
    ) -> tuple[Any, ...]:
        return (x, first.name, a, [f.name for f in rest])

    fns = [NamedFunction("then"), NamedFunction("else"), NamedFunction("")]
    frame = h.invoke(funcs, [9], attrs=[1], funcs=fns)
    assert values(frame) == [(9, "then", 1, ["else", ""])]


def test_context_roles_and_arguments_around_them(h: Harness) -> None:
    @kernel("t.ctx")
    def ctx(a: int, exec_ctx: ExecutionContext, frame: KernelFrame, b: int) -> tuple[Any, ...]:
        return (a, b, exec_ctx.host is h.host, frame.name, frame.location)

    assert values(h.invoke(ctx, [1, 2])) == [(1, 2, True, "t.ctx", LOC)]


# -- the trailing chain rule ---------------------------------------------------------------------


def test_trailing_chain_operand_is_ignored(h: Harness) -> None:
    @kernel("t.neg")
    def neg(x: int) -> int:
        return -x

    assert values(h.invoke(neg, [4, CHAIN])) == [-4]


def test_extra_operand_that_is_not_a_chain_is_an_error(h: Harness) -> None:
    @kernel("t.neg2")
    def neg(x: int) -> int:
        return -x

    frame = h.invoke(neg, [4, 5])
    msg = "kernel 't.neg2' takes 1 arguments but the op has 2"
    assert values(frame) == [Status(msg, KERNEL_ERROR)]
    assert h.diagnostics.messages == [msg]


def test_missing_operand_is_an_error(h: Harness) -> None:
    @kernel("t.pair")
    def pair(x: int, y: int) -> int:
        return x + y

    assert values(h.invoke(pair, [1]))[0].message.startswith("kernel 't.pair' takes 2 arguments")


# -- results -----------------------------------------------------------------------------------


def test_tuple_return_fills_several_results(h: Harness) -> None:
    @kernel("t.divmod")
    def dm(a: int, b: int) -> tuple[int, int]:
        return divmod(a, b)

    assert values(h.invoke(dm, [17, 5], num_results=2)) == [3, 2]


def test_tuple_return_for_one_result_is_one_payload(h: Harness) -> None:
    @kernel("t.tuple1")
    def one() -> tuple[int, int]:
        return (1, 2)

    assert values(h.invoke(one)) == [(1, 2)]


def test_async_result_completes_later(h: Harness) -> None:
    pending: list[AsyncValue[int]] = []

    @kernel("t.later")
    def later(x: int) -> AsyncValue[int]:
        out: AsyncValue[int] = make_unconstructed()
        pending.append(out)
        return out

    frame = h.invoke(later, [1])
    result = frame.results[0]
    assert result is not None and result.is_unavailable()
    pending[0].emplace(99)
    assert result.get() == 99


def test_none_with_results_set_through_the_frame(h: Harness) -> None:
    @kernel("t.frame_results")
    def fill(x: int, frame: KernelFrame) -> None:
        frame.emplace_result(0, x + 1)
        frame.set_result(1, make_available("two"))

    assert values(h.invoke(fill, [1], num_results=2)) == [2, "two"]


def test_none_for_an_op_without_results(h: Harness) -> None:
    seen: list[int] = []

    @kernel("t.sink")
    def sink(x: int) -> None:
        seen.append(x)

    frame = h.invoke(sink, [5], num_results=0)
    assert frame.results == [] and seen == [5]
    assert h.diagnostics.messages == []


@pytest.mark.parametrize(
    ("out", "num_results", "message"),
    [
        (None, 1, "kernel 't.bad' returned no value for its result"),
        (None, 2, "kernel 't.bad' did not set all of its 2 results"),
        ((1, 2, 3), 2, "kernel 't.bad' must return 2 results"),
        (7, 2, "kernel 't.bad' must return 2 results"),
    ],
)
def test_wrong_return_arity_is_a_reported_error(
    h: Harness, out: Any, num_results: int, message: str
) -> None:
    @kernel("t.bad")
    def bad() -> Any:
        return out

    frame = h.invoke(bad, num_results=num_results)
    assert values(frame) == [Status(message, KERNEL_ERROR)] * num_results
    assert h.diagnostics.messages == [message]
    assert h.diagnostics.diagnostics[0].location == LOC


def test_exception_reports_one_diagnostic_and_error_results(h: Harness) -> None:
    @kernel("t.fail")
    def fail(x: int) -> tuple[int, int]:
        raise KernelError(f"cannot handle {x}")

    frame = h.invoke(fail, [3], num_results=2)
    assert values(frame) == [Status("cannot handle 3", KERNEL_ERROR)] * 2
    assert len(h.diagnostics.diagnostics) == 1
    diag = h.diagnostics.diagnostics[0]
    assert (diag.message, diag.location) == ("cannot handle 3", LOC)
    assert str(diag) == "kernels.mlir:12:5: error: cannot handle 3"


def test_exception_without_message_uses_the_type_name(h: Harness) -> None:
    @kernel("t.keyerror")
    def fail() -> int:
        table: dict[str, int] = {}
        return table["missing"]

    assert values(h.invoke(fail))[0].message == "'missing'"

    @kernel("t.bare")
    def bare() -> int:
        raise ValueError

    assert values(h.invoke(bare))[0].message == "ValueError"


def test_exception_after_allocating_a_result_sets_it_to_the_error(h: Harness) -> None:
    allocated: list[AsyncValue[Any]] = []
    done = make_available("kept")

    @kernel("t.partial")
    def partial(frame: KernelFrame) -> None:
        allocated.append(frame.allocate_result(0))
        frame.set_result(1, done)
        raise RuntimeError("half way")

    frame = h.invoke(partial, num_results=3)
    assert frame.results[0] is allocated[0] and allocated[0].error.message == "half way"
    assert frame.results[1] is done and done.get() == "kept"
    assert values(frame)[2] == Status("half way", KERNEL_ERROR)
    assert h.diagnostics.messages == ["half way"]


def test_report_error_later_from_another_thread(h: Harness) -> None:
    @kernel("t.async_fail")
    def async_fail(frame: KernelFrame) -> None:
        frame.allocate_result(0)
        threading.Thread(target=lambda: frame.report_error("late failure")).start()

    frame = h.invoke(async_fail)
    result = frame.results[0]
    assert result is not None
    h.host.await_values([result])
    assert result.error.message == "late failure"
    assert [(d.message, d.location) for d in h.diagnostics.diagnostics] == [("late failure", LOC)]


def test_frame_emit_error_returns_an_error_value(h: Harness) -> None:
    @kernel("t.emit")
    def emit(frame: KernelFrame) -> AsyncValue[Any]:
        return frame.emit_error("emitted")

    assert values(h.invoke(emit)) == [Status("emitted", KERNEL_ERROR)]
    assert h.diagnostics.messages == ["emitted"]


def test_error_values_returned_by_a_kernel_are_not_emitted(h: Harness) -> None:
    @kernel("t.silent_error")
    def silent() -> AsyncValue[Any]:
        return make_error("quiet")

    assert values(h.invoke(silent)) == [Status("quiet")]
    assert h.diagnostics.messages == []


# -- sync kernels ------------------------------------------------------------------------------


def test_sync_kernel_via_call_sync(h: Harness) -> None:
    @kernel("t.sync.add", sync=True)
    def add(a: int, b: int, scale: Attr[int]) -> int:
        return (a + b) * scale

    @kernel("t.sync.split", sync=True)
    def split(a: int) -> tuple[int, int]:
        return a // 2, a % 2

    @kernel("t.sync.noop", sync=True)
    def noop(a: int) -> None:
        return None

    h.registry.add(add, split, noop)
    ctx = h.host.new_execution_context()
    entry = h.registry.get("t.sync.add")
    assert entry.kind is KernelKind.SYNC
    assert entry.call_sync([1, 2], [10], [], ctx) == [30]
    assert entry.call_sync([1, 2, CHAIN], [10], [], ctx) == [30]
    assert h.registry.get("t.sync.split").call_sync([7], [], [], ctx) == [3, 1]
    assert h.registry.get("t.sync.noop").call_sync([7], [], [], ctx) == []


def test_sync_kernel_errors_propagate_and_are_not_emitted(h: Harness) -> None:
    @kernel("t.sync.fail", sync=True)
    def fail(a: int) -> int:
        raise KernelError("sync failure")

    @kernel("t.sync.av", sync=True)
    def wants_av(a: AsyncValue[int]) -> int:
        return 0

    h.registry.add(fail, wants_av)
    ctx = h.host.new_execution_context()
    with pytest.raises(KernelError, match="sync failure"):
        h.registry.get("t.sync.fail").call_sync([1], [], [], ctx)
    with pytest.raises(KernelError, match="cannot take an AsyncValue"):
        h.registry.get("t.sync.av").call_sync([1], [], [], ctx)
    assert h.diagnostics.messages == []


# -- registration ------------------------------------------------------------------------------


def test_one_function_under_several_names() -> None:
    @kernel("t.copy.i32", "t.copy.i64")
    def copy(x: int) -> int:
        return x

    registry = KernelRegistry()
    registry.add(copy)
    assert registry.names() == ["t.copy.i32", "t.copy.i64"]
    assert registry.get("t.copy.i64").fn is copy
    assert len(registry) == 2


def test_duplicate_registration_is_an_error() -> None:
    @kernel("t.dup")
    def one() -> int:
        return 1

    registry = KernelRegistry()
    registry.add(one)
    with pytest.raises(RegistryError, match="kernel 't.dup' is already registered"):
        registry.add_kernel("t.dup", one)


def test_unknown_kernel_name() -> None:
    registry = KernelRegistry()
    with pytest.raises(RegistryError) as info:
        registry.get("x")
    assert str(info.value) == "unknown kernel name 'x'"
    assert registry.find("x") is None
    assert "x" not in registry and 3 not in registry


def test_bad_registrations_are_rejected_with_the_reason() -> None:
    with pytest.raises(RegistryError, match="at least one kernel name"):
        kernel()

    def unmarked(x: int) -> int:
        return x

    def keyword_only(*, x: int) -> int:
        return x

    def unresolvable(x: UndefinedType) -> int:  # type: ignore[name-defined]  # noqa: F821
        return 0

    registry = KernelRegistry()
    with pytest.raises(RegistryError, match="not marked with @kernel"):
        registry.add(unmarked)
    with pytest.raises(RegistryError, match="keyword-only parameter 'x'"):
        registry.add_kernel("t.kw", keyword_only)
    with pytest.raises(RegistryError, match="cannot resolve the annotations"):
        registry.add_kernel("t.unresolvable", unresolvable)


def test_intern_type_returns_one_canonical_string() -> None:
    registry = KernelRegistry()
    a = registry.intern_type("".join(["!tfrt", ".chain"]))
    b = registry.intern_type("".join(["!tfrt.", "chain"]))
    assert a == b == "!tfrt.chain" and a is b


# -- modules, files and lazy libraries ---------------------------------------------------------

MODULE_WITH_REGISTER = """
from pytfrt.host import kernel

@kernel("{prefix}.triple.i32")
def triple(x: int) -> int:
    return 3 * x

@kernel("{prefix}.unused")
def unused() -> int:
    return 0

def register(registry):
    registry.add(triple)
"""

MODULE_WITHOUT_REGISTER = """
from pytfrt.host import kernel

@kernel("{prefix}.inc.i32")
def inc(x: int) -> int:
    return x + 1

def helper():
    return "not a kernel"
"""


def make_module(name: str, source: str) -> ModuleType:
    module = ModuleType(name)
    exec(compile(source, name, "exec"), module.__dict__)  # noqa: S102 - a test plugin module
    return module


def test_add_module_calls_register() -> None:
    registry = KernelRegistry()
    registry.add_module(make_module("m1", MODULE_WITH_REGISTER.format(prefix="m1")))
    assert registry.names() == ["m1.triple.i32"]  # register() chose what to add


def test_add_module_without_register_adds_every_decorated_function() -> None:
    registry = KernelRegistry()
    registry.add_module(make_module("m2", MODULE_WITHOUT_REGISTER.format(prefix="m2")))
    assert registry.names() == ["m2.inc.i32"]


def test_add_module_with_nothing_to_add_is_an_error() -> None:
    with pytest.raises(RegistryError, match="no register\\(registry\\) and no @kernel"):
        KernelRegistry().add_module(make_module("empty", "x = 1\n"))


def test_load_kernels_from_a_file(tmp_path: Path, h: Harness) -> None:
    path = tmp_path / "my_kernels.py"
    path.write_text(MODULE_WITHOUT_REGISTER.format(prefix="file"))
    module = load_kernels(h.registry, str(path))
    assert module.__file__ == str(path)
    assert h.registry.names() == ["file.inc.i32"]
    assert values(h.invoke(module.inc, [41])) == [42]


def test_load_kernels_from_a_module_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pytfrt_test_named_kernels.py").write_text(
        MODULE_WITH_REGISTER.format(prefix="named")
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pytfrt_test_named_kernels", raising=False)
    registry = KernelRegistry()
    load_kernels(registry, "pytfrt_test_named_kernels")
    assert registry.names() == ["named.triple.i32"]


def test_load_kernels_errors_are_clear(tmp_path: Path) -> None:
    registry = KernelRegistry()
    with pytest.raises(RegistryError, match="kernel file 'nowhere/k.py' does not exist"):
        load_kernels(registry, "nowhere/k.py")
    with pytest.raises(RegistryError, match="cannot load kernels from 'no_such_module_xyz'.*"
                       "ModuleNotFoundError"):
        load_kernels(registry, "no_such_module_xyz")
    broken = tmp_path / "broken.py"
    broken.write_text("def oops(:\n")
    with pytest.raises(RegistryError, match="cannot load kernels from .*broken.py.*SyntaxError"):
        load_kernels(registry, str(broken))
    raising = tmp_path / "raising.py"
    raising.write_text("raise RuntimeError('module body failed')\n")
    with pytest.raises(RegistryError, match="RuntimeError: module body failed"):
        load_kernels(registry, str(raising))
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    with pytest.raises(RegistryError, match="no register"):
        load_kernels(registry, str(empty))


def test_load_kernels_module_name_that_is_also_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "pytfrt_test_pkg_kernels"
    package.mkdir()
    (package / "__init__.py").write_text(MODULE_WITHOUT_REGISTER.format(prefix="pkg"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "pytfrt_test_pkg_kernels", raising=False)
    registry = KernelRegistry()
    load_kernels(registry, "pytfrt_test_pkg_kernels")
    assert registry.names() == ["pkg.inc.i32"]


@pytest.fixture
def lazy_libraries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Two importable kernel modules, ``pytfrt_lazy_alpha`` (alpha.*) and ``..._beta``."""
    names = []
    for lib in ("alpha", "beta"):
        name = f"pytfrt_lazy_{lib}"
        (tmp_path / f"{name}.py").write_text(MODULE_WITH_REGISTER.format(prefix=lib))
        monkeypatch.delitem(sys.modules, name, raising=False)
        names.append(name)
    monkeypatch.syspath_prepend(str(tmp_path))
    return names


def test_lazy_libraries_load_by_prefix(lazy_libraries: list[str]) -> None:
    alpha, beta = lazy_libraries
    registry = KernelRegistry()
    registry.add_lazy_library(alpha, ["alpha."])
    registry.add_lazy_library(beta, ["beta."])
    assert alpha not in sys.modules and beta not in sys.modules
    entry = registry.get("alpha.triple.i32")
    assert entry.fn(2) == 6
    assert alpha in sys.modules and beta not in sys.modules  # only the matching library
    assert registry.names() == ["alpha.triple.i32", "beta.triple.i32"]  # names() loads all
    assert beta in sys.modules


def test_lazy_unknown_name_loads_everything_then_fails(lazy_libraries: list[str]) -> None:
    alpha, beta = lazy_libraries
    registry = KernelRegistry()
    registry.add_lazy_library(alpha, ["alpha."])
    registry.add_lazy_library(beta, ["beta."])
    with pytest.raises(RegistryError, match="unknown kernel name 'gamma.x'"):
        registry.get("gamma.x")
    assert "beta.triple.i32" in registry  # loaded once, not again
    assert len(registry) == 2


def test_lazy_library_is_loaded_once_under_concurrent_lookups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The module takes 0.2 s to import, so the other lookups happen while it loads.
    name = "pytfrt_lazy_slow"
    source = "import time\ntime.sleep(0.2)\n" + MODULE_WITH_REGISTER.format(prefix="slow")
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = KernelRegistry()
    registry.add_lazy_library(name, ["slow."])
    gate = threading.Barrier(6, timeout=10)
    found: list[object] = []
    failures: list[BaseException] = []

    def look() -> None:
        gate.wait()
        try:
            found.append(registry.get("slow.triple.i32"))
        except BaseException as exc:  # noqa: BLE001 - checked below
            failures.append(exc)

    threads = [threading.Thread(target=look) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert failures == []  # a second load would raise "already registered"
    assert len(found) == 6 and all(f is found[0] for f in found)


def test_kernel_manual_example_from_the_readme(tmp_path: Path) -> None:
    source = textwrap.dedent(
        """
        from pytfrt.host import Attr, kernel

        @kernel("my.scale.i32")
        def scale_i32(x: int, factor: Attr[int]) -> int:
            return x * factor
        """
    )
    path = tmp_path / "readme_kernels.py"
    path.write_text(source)
    h = Harness()
    module = load_kernels(h.registry, str(path))
    assert values(h.invoke(module.scale_i32, [7], attrs=[3])) == [21]
