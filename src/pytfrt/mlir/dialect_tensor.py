"""Tensor dialects (docs/conformance.md): ``tfrt_dht``, ``ts``, ``coo`` op tables, plus the dialects
whose ops are all written in generic form (``tfrt_sht``, ``btf``, ``eigen``, ``vt``,
``tfrt_tutorial``), registered so that ``tfrt_opt`` knows them.
"""

from __future__ import annotations

from xdsl.ir import Dialect

from pytfrt.mlir.ops_base import CHAIN, OpSpec, make_op_classes
from pytfrt.mlir.types import ALIAS_CLASSES, TYPE_CLASSES

TENSOR = "!t.tensor"
SHAPE = "!ts.shape"
PSHAPE = "!ts.partial_shape"
HOSTBUF = "!ht.host_buffer"
DHT_DTYPES = (
    "ui8", "ui16", "ui32", "ui64", "i1", "i8", "i16", "i32", "i64", "bool",
    "f16", "bf16", "f32", "f64", "complex64", "complex128",
)  # fmt: skip


def _dht_specs() -> list[OpSpec]:
    rows = [
        OpSpec("tfrt_dht.print_tensor", "simple", (TENSOR, CHAIN), (CHAIN,)),
        OpSpec("tfrt_dht.get_tensor_shape", "simple", (TENSOR,), (SHAPE,)),
        # Host buffers: TFRT's dense_host_tensor_kernels.cc (size and alignment are operands).
        OpSpec("tfrt_dht.allocate_buffer", "simple", ("i64", "i64"), (HOSTBUF,)),
        OpSpec("tfrt_dht.get_buffer", "simple", (TENSOR, CHAIN), (HOSTBUF, CHAIN)),
        OpSpec("tfrt_dht.get_buffer_slice", "simple", (HOSTBUF, "i64", "i64"), (HOSTBUF,)),
        OpSpec("tfrt_dht.print_buffer", "simple", (HOSTBUF, CHAIN), (CHAIN,)),
    ]
    for t in DHT_DTYPES:
        for r in range(6):
            rows.append(
                OpSpec(
                    f"tfrt_dht.create_uninitialized_tensor.{t}.{r}", "attr", (), (TENSOR,), "shape"
                )
            )
        rows.append(
            OpSpec(f"tfrt_dht.make_tensor.{t}", "simple", (HOSTBUF, SHAPE, CHAIN), (TENSOR, CHAIN))
        )
        rows.append(
            OpSpec(f"tfrt_dht.fill_tensor_with_constant.{t}", "attr", (TENSOR, CHAIN), (CHAIN,))
        )
        rows.append(
            OpSpec(
                f"tfrt_dht.set_tensor_with_constant_values.{t}",
                "attr",
                (TENSOR, CHAIN),
                (CHAIN,),
                "values",
            )
        )
        rows.append(
            OpSpec(f"tfrt_dht.tensor_equal.{t}", "simple", (TENSOR, TENSOR, CHAIN), ("i1", CHAIN))
        )
    return rows


def _dht_sync_specs() -> list[OpSpec]:
    """The ``tfrt_dht_sync`` twins for sync functions: no chains."""
    rows = [
        OpSpec("tfrt_dht_sync.print_tensor", "simple", (TENSOR,), ()),
        OpSpec("tfrt_dht_sync.get_tensor_shape", "simple", (TENSOR,), (SHAPE,)),
    ]
    for t in DHT_DTYPES:
        for r in range(6):
            rows.append(
                OpSpec(
                    f"tfrt_dht_sync.create_uninitialized_tensor.{t}.{r}", "attr", (), (TENSOR,),
                    "shape",
                )
            )
        rows.append(OpSpec(f"tfrt_dht_sync.fill_tensor_with_constant.{t}", "attr", (TENSOR,), ()))
        rows.append(
            OpSpec(f"tfrt_dht_sync.set_tensor_with_constant_values.{t}", "attr", (TENSOR,), (),
                   "values")
        )
        rows.append(OpSpec(f"tfrt_dht_sync.tensor_equal.{t}", "simple", (TENSOR, TENSOR), ("i1",)))
    return rows


def _ts_specs() -> list[OpSpec]:
    rows = [
        OpSpec("ts.build_shape", "attr", (), (SHAPE,)),
        OpSpec("ts.build_partial_shape", "attr", (), (PSHAPE,)),
        OpSpec("ts.build_unranked_partial_shape", "simple", (), (PSHAPE,)),
        OpSpec("ts.equal_shape", "simple", (SHAPE, SHAPE), ("i1",)),
        OpSpec("ts.get_num_elements", "simple", (SHAPE,), ("i64",)),
        OpSpec("ts.get_dimension", "simple", (SHAPE, "i32"), ("i64",)),
        OpSpec("ts.print_shape", "simple", (SHAPE, CHAIN), (CHAIN,)),
        OpSpec("ts.print_partial_shape", "simple", (PSHAPE, CHAIN), (CHAIN,)),
        OpSpec("ts.to_shape", "simple", (PSHAPE,), (SHAPE,)),
        OpSpec("ts.to_partial_shape", "simple", (SHAPE,), (PSHAPE,)),
    ]
    for n in range(1, 4):
        fixed = f"!ts.fixed_rank_shape.{n}"
        rows.append(OpSpec(f"ts.as_fixed_rank_shape.{n}", "simple", (SHAPE,), (fixed,)))
        rows.append(OpSpec(f"ts.print_fixed_rank_shape.{n}", "simple", (fixed, CHAIN), (CHAIN,)))
    return rows


def _coo_specs() -> list[OpSpec]:
    rows = []
    for t in ("f32", "i32"):
        for r in range(4):
            rows.append(
                OpSpec(
                    f"coo.convert_dht_to_coo.{t}.{r}", "simple", (TENSOR, CHAIN), (TENSOR, CHAIN)
                )
            )
            rows.append(
                OpSpec(
                    f"coo.convert_coo_to_dht.{t}.{r}", "simple", (TENSOR, CHAIN), (TENSOR, CHAIN)
                )
            )
            rows.append(
                OpSpec(
                    f"coo.tensor_equal.{t}.{r}", "simple", (TENSOR, TENSOR, CHAIN), ("i1", CHAIN)
                )
            )
    return rows


def _types(prefix: str) -> list:
    return [cls for name, cls in TYPE_CLASSES.items() if name.startswith(prefix + ".")]


def tensor_dialects() -> list[Dialect]:
    """``tfrt_dht``, ``ts``, ``coo``, ``t`` (also spelled ``tfrt_tensor``) and the generic-only
    dialects."""
    return [
        Dialect("tfrt_dht", make_op_classes(_dht_specs()), []),
        Dialect("tfrt_dht_sync", make_op_classes(_dht_sync_specs()), []),
        Dialect("ts", make_op_classes(_ts_specs()), _types("ts")),
        Dialect("coo", make_op_classes(_coo_specs()), []),
        Dialect("t", [], _types("t")),
        Dialect("tfrt_tensor", [], [ALIAS_CLASSES["tfrt_tensor.tensor"]]),
        Dialect("tfrt_sht", [], []),
        Dialect("tfrt_sht_sync", [], []),
        Dialect("btf", [], []),
        Dialect("eigen", [], []),
        Dialect("vt", [], _types("vt")),
        Dialect("tfrt_tutorial", [], []),
        Dialect("test", [], _types("test")),
        Dialect("my", [], _types("my")),
        Dialect("ht", [], _types("ht")),
    ]
