"""Host tensors: DType, shapes, DenseHostTensor (NumPy), string/COO/scalar tensors, BTF files.

The ``ts``/``tfrt_dht``/``coo``/``tfrt_sht``/``btf`` kernels are in
:mod:`pytfrt.tensor.kernels` (registered lazily by the built-in registry).
Depends on :mod:`pytfrt.host`, :mod:`pytfrt.support`, NumPy and ml_dtypes only.  Importing the
package, DType and DenseHostTensor does not import NumPy (a NumPy-free process, docs/host.md):
the COO, scalar and string tensors, which need it, are imported on first use.
Floating-point ``RuntimeWarning``s raised from this package's modules (e.g. comparing tensors
holding ``inf``) are ignored: IEEE results are the intended semantics.
"""

import warnings
from typing import TYPE_CHECKING, Any

from pytfrt.tensor.dense_host_tensor import AllocationError as AllocationError
from pytfrt.tensor.dense_host_tensor import DenseHostTensor as DenseHostTensor
from pytfrt.tensor.dense_host_tensor import HostBuffer as HostBuffer
from pytfrt.tensor.dense_host_tensor import allocate_dense as allocate_dense
from pytfrt.tensor.dense_host_tensor import wrap_result as wrap_result
from pytfrt.tensor.dtype import DType as DType
from pytfrt.tensor.dtype import dtype_from_code as dtype_from_code
from pytfrt.tensor.dtype import dtype_from_name as dtype_from_name
from pytfrt.tensor.dtype import dtype_from_numpy as dtype_from_numpy
from pytfrt.tensor.shape import FixedRankShape as FixedRankShape
from pytfrt.tensor.shape import PartialTensorShape as PartialTensorShape
from pytfrt.tensor.shape import ShapeError as ShapeError
from pytfrt.tensor.shape import TensorMetadata as TensorMetadata
from pytfrt.tensor.shape import TensorShape as TensorShape

if TYPE_CHECKING:
    from pytfrt.tensor.coo_host_tensor import CooHostTensor as CooHostTensor
    from pytfrt.tensor.scalar_host_tensor import ScalarHostTensor as ScalarHostTensor
    from pytfrt.tensor.string_host_tensor import StringHostTensor as StringHostTensor


def __getattr__(name: str) -> Any:
    """The tensor classes that need NumPy, imported on first use."""
    modules = {"CooHostTensor": "coo_host_tensor", "ScalarHostTensor": "scalar_host_tensor",
               "StringHostTensor": "string_host_tensor"}
    if name not in modules:
        raise AttributeError(f"module 'pytfrt.tensor' has no attribute '{name}'")
    import importlib

    value = getattr(importlib.import_module(f"pytfrt.tensor.{modules[name]}"), name)
    globals()[name] = value
    return value


warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"pytfrt\.tensor(\.|$)")

__all__ = [
    "AllocationError",
    "CooHostTensor",
    "DType",
    "DenseHostTensor",
    "FixedRankShape",
    "HostBuffer",
    "PartialTensorShape",
    "ScalarHostTensor",
    "ShapeError",
    "StringHostTensor",
    "TensorMetadata",
    "TensorShape",
    "allocate_dense",
    "dtype_from_code",
    "dtype_from_name",
    "dtype_from_numpy",
    "wrap_result",
]
