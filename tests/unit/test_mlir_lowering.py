"""Lowering of MLIR to Program: registers, used-by order, function order, attributes, locations."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

pytest.importorskip("xdsl")

from pytfrt.mlir import MlirError, compile_mlir, parse_source, print_module
from pytfrt.support import attributes as pa
from pytfrt.support.function_kind import FunctionKind
from pytfrt.support.location import FileLineColLoc, NameLoc, UnknownLoc

DATA = Path(__file__).parent / "data"

BASIC = """\
func.func @main(%x: i32) -> i32 {
  %ch = tfrt.new.chain
  %one = tfrt.constant.i32 1
  %y = tfrt.add.i32 %x, %one
  %z = tfrt.add.i32 %y, %y
  %ch1 = tfrt.print.i32 %z, %ch
  tfrt.return %z : i32
}
"""


def test_registers_kernels_and_used_by() -> None:
    fn = compile_mlir(BASIC, "b.mlir").get("main")
    assert fn.argument_types == ["i32"]
    assert fn.register_types == ["i32", "!tfrt.chain", "i32", "i32", "i32", "!tfrt.chain"]
    assert [k.name for k in fn.kernels] == [
        "tfrt.new.chain", "tfrt.constant.i32", "tfrt.add.i32", "tfrt.add.i32", "tfrt.print.i32",
    ]  # fmt: skip
    assert [k.operands for k in fn.kernels] == [[], [], [0, 2], [3, 3], [4, 1]]
    assert fn.return_registers == [4]
    # %y (kernel 2) is used twice by kernel 3; MLIR use lists: reverse program order
    assert fn.used_by[2] == [[3, 3]]
    assert fn.used_by[3] == [[4]]  # the return is not a user
    assert fn.pseudo_used_by[0] == [0, 1]
    assert fn.use_counts[4] == 2  # print + return


def test_locations_point_at_op_start() -> None:
    fn = compile_mlir(BASIC, "b.mlir").get("main")
    assert fn.location == FileLineColLoc("b.mlir", 1, 1)
    assert fn.kernels[0].location == FileLineColLoc("b.mlir", 2, 3)  # `%ch = ...`
    text = (
        'func.func @f() {\n  "t.a"() : () -> () loc("name")\n'
        '  "t.b"() : () -> () loc(unknown)\n  "t.c"() : () -> () loc("f.mlir":7:9)\n'
        "  tfrt.return\n}\n"
    )
    kernels = compile_mlir(text, "x.mlir").get("f").kernels
    assert kernels[0].location == NameLoc("name")
    assert isinstance(kernels[1].location, UnknownLoc)
    assert kernels[2].location == FileLineColLoc("f.mlir", 7, 9)


def test_function_order_is_post_order() -> None:
    text = """\
func.func @a(%c: i1, %v: i32) -> i32 {
  %r = tfrt.if %c, %v : (i32) -> (i32) {
    %n = tfrt.repeat.i32 %v, %v : i32 {
      tfrt.return %v : i32
    }
    tfrt.return %n : i32
  } else {
    tfrt.return %v : i32
  }
  tfrt.return %r : i32
}
func.func @b() {
  tfrt.return
}
"""
    prog = compile_mlir(text, "o.mlir")
    # repeat body, then-region, else-region, @a, @b
    assert [f.name for f in prog.functions] == ["", "", "", "a", "b"]
    then = prog.functions[1]
    assert then.kernels[0].name == "tfrt.repeat.i32" and then.kernels[0].functions == [0]
    assert prog.get("a").kernels[0].functions == [1, 2]


def test_attribute_conversion() -> None:
    text = """\
func.func @f() {
  "t.op"() {i = 7 : i32, b = true, u = 255 : ui8, f = 1.5 : f32, d = 2.5 : f64,
            s = "str", arr = [1 : i64, 2 : i64], agg = [["a", [1 : i32]], 1.0 : f32],
            ty = f32, e = [], dense = dense<[1, 2, 3]> : tensor<3xi32>,
            splat = dense<1.0> : tensor<2x2xf32>, shape = #corert.shape<2x?x3>,
            unranked = #corert.shape<*>, _tfrt_cost = 3 : i64} : () -> ()
  tfrt.return
}
"""
    kern = compile_mlir(text, "a.mlir").get("f").kernels[0]
    attrs = dict(kern.attributes)
    assert [n for n, _ in kern.attributes] == sorted(attrs)
    assert "_tfrt_cost" not in attrs and kern.cost == 3
    assert attrs["i"] == pa.IntAttr(7, "i32")
    assert attrs["b"] == pa.IntAttr(1, "i1") and attrs["b"].value is True
    assert attrs["u"] == pa.IntAttr(255, "ui8")
    assert attrs["f"] == pa.FloatAttr(1.5, "f32")
    assert attrs["d"] == pa.FloatAttr(2.5, "f64")
    assert attrs["s"] == pa.StringAttr("str")
    assert attrs["arr"] == pa.ArrayAttr((pa.IntAttr(1, "i64"), pa.IntAttr(2, "i64")), "i64")
    assert isinstance(attrs["agg"], pa.AggregateAttr)
    assert attrs["agg"].value == (("a", (1,)), 1.0)
    assert attrs["ty"] == pa.TypeAttr("f32")
    assert attrs["e"] == pa.ArrayAttr((), "i32")
    assert attrs["dense"] == pa.DenseAttr("i32", (3,), struct.pack("<3i", 1, 2, 3))
    assert attrs["splat"] == pa.DenseAttr("f32", (2, 2), struct.pack("<4f", *[1.0] * 4))
    assert attrs["shape"] == pa.ShapeAttr((2, -1, 3))
    assert attrs["unranked"] == pa.ShapeAttr(None)


def test_function_references_and_kinds() -> None:
    text = """\
func.func private @native(i32) -> i32 attributes {tfrt.native}
func.func @s(%a: i32) -> i32 attributes {tfrt.sync} {
  %b = "tfrt.add_s.i32"(%a, %a) : (i32, i32) -> i32
  tfrt.return %b : i32
}
func.func @m(%i: i32) -> i32 {
  %r = tfrt.call @s(%i) : (i32) -> i32
  %q = tfrt.case %i [@s, @native] (%r) : (i32) -> (i32)
  tfrt.return %q : i32
}
"""
    prog = compile_mlir(text, "k.mlir")
    assert [f.kind for f in prog.functions] == [
        FunctionKind.NATIVE,
        FunctionKind.SYNC,
        FunctionKind.BEF,
    ]
    call, case = prog.get("m").kernels
    assert call.functions == [1] and call.function_attr_names == ["callee"]
    assert case.functions == [1, 0] and case.function_attr_names == ["branches"]
    assert call.attributes == []


def test_cost_threshold_from_module() -> None:
    text = (
        "module attributes {tfrt.cost_threshold = 10 : i64} {\n"
        "  func.func @f() {\n    tfrt.return\n  }\n}\n"
    )
    assert compile_mlir(text, "c.mlir").get("f").cost_threshold == 10


def test_playground_programs_parse_in_2020_syntax() -> None:
    prog = compile_mlir((DATA / "nqueens.mlir").read_text(), "nqueens.mlir")
    fn = prog.get("nqueen")
    assert [k.name for k in fn.kernels] == [
        "tfrt.new.chain", "tfrt.constant.i32", "tfrt.constant.i32", "nqueens.i32", "tfrt.print.i32",
    ]  # fmt: skip
    assert fn.kernels[3].location == FileLineColLoc("nqueens.mlir", 6, 3)
    xor = compile_mlir((DATA / "mlp_xor.mlir").read_text(), "mlp_xor.mlir")
    assert [f.name for f in xor.functions] == [
        "test_sigmoid",
        "test_sigmoid_gradient",
        "xor_inference",
    ]
    merge = next(k for k in xor.get("xor_inference").kernels if k.name == "tfrt.merge.chains")
    assert len(merge.operands) == 6
    assert "tfrt_dht.print_tensor" in [k.name for k in xor.get("test_sigmoid").kernels]


@pytest.mark.parametrize(
    ("text", "message", "line", "col"),
    [
        (
            "func.func @f() {\n  %x = tfrt.new.chain\n}\n",
            "all functions need to have a tfrt.return",
            2,
            3,
        ),
        ("func.func @f()\n", "external functions are not allowed", 1, 1),
        (
            'func.func @f() {\n  "x.y"() {fn = @missing_callee} : () -> ()\n  tfrt.return\n}\n',
            "function @missing_callee not defined",
            2,
            3,
        ),
        (
            "func.func @f(%a: i32) -> i32 attributes {tfrt.sync} {\n  tfrt.return %a : i32\n}\n",
            "return value 0 is an argument in a sync function",
            2,
            3,
        ),
        (
            "func.func @f() -> i32 {\n  %a = tfrt.constant.i32 1\n  tfrt.return %a : i32\n"
            "  %b = tfrt.constant.i32 1\n  tfrt.return %b : i32\n}\n",
            "return op must be at the end of its block",
            3,
            3,
        ),
        (
            "func.func @f() {\n  %a = tfrt.constant.i32 1\n  tfrt.repeat.i32 %a {\n"
            "    %c = tfrt.add.i32 %a, %a\n    tfrt.return\n  }\n  tfrt.return\n}\n",
            "BEF executor only supports references to kernels within the current region",
            4,
            5,
        ),
        (
            "func.func @f() {\n  tfrt.call @missing_callee() : () -> ()\n  tfrt.return\n}\n",
            "'missing_callee' does not reference a valid function",
            2,
            3,
        ),
        (
            "func.func @f() {\n  %x = tfrt.add.i32 %y, %y\n  tfrt.return\n}\n",
            "use of undeclared SSA value name",
            2,
            21,
        ),
        (
            "func.func @f() -> i32 {\n  tfrt.return\n}\n",
            "has 0 operands, but enclosing function returns 1",
            2,
            3,
        ),
        (
            "func.func @f() {\n  %a = tfrt.constant.i32 1\n"
            "  %b = tfrt_test.test_cost %a {_tfrt_cost = 0 : i64} : i32\n  tfrt.return\n}\n",
            "op cost value must be larger than 0",
            3,
            3,
        ),
        (
            'func.func @f() {\n  %s = "ts.build_shape"() {value = [1 : i64]} : () -> i32\n'
            "  tfrt.return\n}\n",
            "'ts.build_shape' op result #0 must be !ts.shape type",
            2,
            3,
        ),
        ("func.func @f() {\n  %a = tfrt.constant.i32 1 +\n}\n", "", 2, 28),
    ],
)
def test_errors_have_positions(text: str, message: str, line: int, col: int) -> None:
    with pytest.raises(MlirError) as info:
        compile_mlir(text, "e.mlir")
    (diag,) = info.value.diagnostics
    assert message in diag.message
    assert (diag.file, diag.line, diag.col) == ("e.mlir", line, col)
    rendered = info.value.render()
    assert rendered.startswith(f"e.mlir:{line}:{col}: error: ")
    assert rendered.splitlines()[2] == " " * (col - 1) + "^"


def test_print_round_trip_is_stable() -> None:
    text = (DATA / "mlp_xor.mlir").read_text()
    once = print_module(parse_source(text, "a").module)
    twice = print_module(parse_source(once, "b").module)
    assert once == twice
    assert "func.func @xor_inference()" in once and "tfrt.merge.chains %" in once
