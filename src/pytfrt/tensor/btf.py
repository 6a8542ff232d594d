"""BTF (Binary Tensor Format) reading and writing (docs/conformance.md).

Layout (all integers little-endian)::

    u64 num_tensors
    u64 offset[num_tensors]          -- byte offset of each tensor record
    record: u64 rank, u8 dtype, u8 layout, 6 padding bytes, u64 dims[rank], raw data

BTF dtype codes: 0 i8, 1 i16, 2 i32, 3 i64, 4 f32, 5 f64, 6 u8, 7 u16, 8 u32, 9 u64.
Layouts: 0 row-major dense, 1 COO (not readable as a dense tensor).

:func:`read_dense_tensor` raises :class:`BtfError` with TFRT's messages
(``failed to open file <path> for reading``, ``invalid tensor index <i> to read tensor from path
<p> which contains <n> tensors``, ``unexpected tensor dtype <d>. Expected dtype is <e>``,
``unexpected tensor rank <r>. Expected rank is <e>``, ``unexpected tensor layout <l>``), and
files are opened through :class:`pytfrt.host.file_access.DataDirectories` (regular files under
the allowed directories only; docs/security.md).
:func:`write_btf` writes a file of dense tensors (used to generate test data).  Reading opens
the file per call and is thread-safe.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np

from pytfrt.host.file_access import UNRESTRICTED, DataDirectories, FileAccessError, RegularFile
from pytfrt.support.errors import PytfrtError
from pytfrt.tensor import dtype as dt
from pytfrt.tensor.dense_host_tensor import DenseHostTensor
from pytfrt.tensor.dtype import DType

BTF_DTYPES: Final[tuple[DType, ...]] = (
    dt.I8, dt.I16, dt.I32, dt.I64, dt.F32, dt.F64, dt.UI8, dt.UI16, dt.UI32, dt.UI64,
)
"""DType of each BTF dtype code (the index)."""

_CODE_OF: Final = {d: i for i, d in enumerate(BTF_DTYPES)}

LAYOUT_ROW_MAJOR: Final = 0
LAYOUT_COO: Final = 1

_HEADER = struct.Struct("<QBB6x")
MAX_RANK: Final = 32
"""Ranks above this are treated as a corrupt header (TFRT's tensors have rank <= 5 here)."""


class BtfError(PytfrtError):
    """A BTF file cannot be read as requested (message as TFRT words it)."""


def read_dense_tensor(
    path: str | Path,
    index: int,
    expected_dtype: DType | None = None,
    expected_rank: int | None = None,
    data_dirs: DataDirectories = UNRESTRICTED,
) -> DenseHostTensor:
    """Read dense tensor ``index`` of the BTF file ``path`` (an unaccounted tensor).

    Only the byte ranges the file's own header validates against the file size are read, so a
    corrupt or hostile file cannot make this allocate more than the file holds; error messages
    never quote the file's bytes (an implausible count, rank or dtype code is reported as a
    corrupt file, not echoed).

    Args:
        path: the file (relative paths are relative to the working directory).
        index: which tensor (0-based).
        expected_dtype: if given, the tensor's dtype must be this.
        expected_rank: if given, the tensor's rank must be this.
        data_dirs: where the file may be (kernels pass their host's data directories).

    Raises:
        BtfError: with one of the messages in the module docstring, for a corrupt or truncated
            file, or a file the policy refuses (outside ``data_dirs``, not a regular file).
    """
    try:
        fh = data_dirs.open(path, f"failed to open file {path} for reading")
    except FileAccessError as exc:
        raise BtfError(str(exc)) from None
    with fh:
        try:
            return _read_tensor(fh, index, expected_dtype, expected_rank)
        except FileAccessError as exc:
            raise BtfError(str(exc)) from None


def _read_tensor(fh: RegularFile, index: int, expected_dtype: DType | None,
                 expected_rank: int | None) -> DenseHostTensor:
    path = fh.path
    if fh.size < 8:
        raise BtfError(f"failed to read the tensor count from file {path}")
    (count,) = struct.unpack("<Q", fh.read(0, 8))
    if count > (fh.size - 8) // 8:
        raise BtfError(f"file {path} is not a BTF file (its tensor count exceeds its size)")
    if index < 0 or index >= count:
        raise BtfError(
            f"invalid tensor index {index} to read tensor from path {path} which contains "
            f"{count} tensors"
        )
    (offset,) = struct.unpack("<Q", fh.read(8 + 8 * index, 8))
    if offset + _HEADER.size > fh.size:
        raise BtfError(f"failed to read the header of tensor {index} from file {path}")
    rank, code, layout = _HEADER.unpack(fh.read(offset, _HEADER.size))
    pos = offset + _HEADER.size
    if rank > MAX_RANK or pos + 8 * rank > fh.size:
        raise BtfError(f"failed to read the shape of tensor {index} from file {path}")
    if code >= len(BTF_DTYPES):
        raise BtfError(f"unexpected tensor dtype code in file {path} (not a BTF dtype)")
    dtype = BTF_DTYPES[code]
    if expected_dtype is not None and dtype is not expected_dtype:
        raise BtfError(
            f"unexpected tensor dtype {dtype.name}. Expected dtype is {expected_dtype.name}"
        )
    if expected_rank is not None and rank != expected_rank:
        raise BtfError(f"unexpected tensor rank {rank}. Expected rank is {expected_rank}")
    if layout != LAYOUT_ROW_MAJOR:
        raise BtfError(
            f"unexpected tensor layout {layout}" if layout <= LAYOUT_COO
            else f"unexpected tensor layout code in file {path}"
        )
    dims = struct.unpack(f"<{rank}Q", fh.read(pos, 8 * rank))
    pos += 8 * rank
    n = 1
    for d in dims:
        n *= d
    nbytes = n * dtype.itemsize
    if pos + nbytes > fh.size:  # checked before anything of that size is allocated
        raise BtfError(f"failed to read the data of tensor {index} from file {path}")
    array = np.frombuffer(fh.read(pos, nbytes), dtype.np_dtype.newbyteorder("<"), n).astype(
        dtype.np_dtype, copy=True
    )
    return DenseHostTensor(dtype, array.reshape(dims))


def encode_btf(tensors: Sequence[np.ndarray | DenseHostTensor]) -> bytes:
    """The bytes of a BTF file holding ``tensors`` (row-major, in order).

    Raises:
        BtfError: for a dtype BTF cannot store.
    """
    arrays = [t.array if isinstance(t, DenseHostTensor) else np.asarray(t) for t in tensors]
    records = []
    for a in arrays:
        try:
            code = _CODE_OF[dt.dtype_from_numpy(a.dtype)]
        except (KeyError, dt.DTypeError):
            raise BtfError(f"BTF cannot store NumPy dtype {a.dtype}") from None
        header = _HEADER.pack(a.ndim, code, LAYOUT_ROW_MAJOR)
        dims = struct.pack(f"<{a.ndim}Q", *a.shape)
        payload = np.ascontiguousarray(a, a.dtype.newbyteorder("<")).tobytes()
        records.append(header + dims + payload)
    out = bytearray(struct.pack("<Q", len(records)))
    offset = 8 + 8 * len(records)
    for r in records:
        out += struct.pack("<Q", offset)
        offset += len(r)
    for r in records:
        out += r
    return bytes(out)


def write_btf(path: str | Path, tensors: Sequence[np.ndarray | DenseHostTensor]) -> None:
    """Write ``tensors`` to the BTF file ``path`` (see :func:`encode_btf`)."""
    Path(path).write_bytes(encode_btf(tensors))


def btf_dtype_code(dtype: DType) -> int:
    """The BTF code of ``dtype``.

    Raises:
        BtfError: if BTF cannot store ``dtype``.
    """
    try:
        return _CODE_OF[dtype]
    except KeyError:
        raise BtfError(f"BTF cannot store dtype {dtype.name}") from None
