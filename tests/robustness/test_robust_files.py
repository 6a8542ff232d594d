"""A program cannot reach the filesystem on its own (docs/security.md).

``btf.read_dense_tensor.*`` reads only regular files under the host's data directories, checks
every size against the file before reading or allocating, and never echoes file bytes.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from robust_harness import read_btf, run_mlir

from pytfrt.tensor.btf import write_btf

pytestmark = pytest.mark.timeout(60)

NOT_UNDER = "the file is not under a data directory"


def error_of(path: str, data_dirs: list[str], **kw: object) -> str:
    run = run_mlir(read_btf(path, **kw), data_dirs=data_dirs)  # type: ignore[arg-type]
    (result,) = run.results
    assert isinstance(result, str) and result.startswith("<<error: "), result
    assert run.diagnostics == [result[len("<<error: "):-2]]  # emitted at the kernel, once
    return result


def test_reads_a_file_under_a_data_directory(tmp_path: Path) -> None:
    write_btf(tmp_path / "t.btf", [np.array([5, 6, 7], np.int32)])
    run = run_mlir(read_btf(str(tmp_path / "t.btf")), data_dirs=[str(tmp_path)])
    assert run.diagnostics == []


def test_system_file_is_refused_without_echoing_it(tmp_path: Path) -> None:
    message = error_of("/etc/passwd", [str(tmp_path)])
    assert NOT_UNDER in message
    assert "root" not in message and "tensors" not in message


def test_relative_escape_and_symlink_out_are_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "link.btf").symlink_to("/etc/passwd")
    assert NOT_UNDER in error_of(str(data / "../../../etc/passwd"), [str(data)])
    assert NOT_UNDER in error_of(str(data / "link.btf"), [str(data)])


def test_devices_are_not_regular_files() -> None:
    assert "not a regular file" in error_of("/dev/zero", ["/dev"])


@pytest.mark.timeout(10)
def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.btf"
    os.mkfifo(fifo)
    assert "not a regular file" in error_of(str(fifo), [str(tmp_path)])


def test_text_file_is_not_a_btf_file_and_its_bytes_are_not_echoed(tmp_path: Path) -> None:
    (tmp_path / "secret.btf").write_text("password=hunter2\n")
    message = error_of(str(tmp_path / "secret.btf"), [str(tmp_path)])
    assert "is not a BTF file" in message
    assert "hunter2" not in message
    assert str(struct.unpack("<Q", b"password")[0]) not in message


def test_huge_claimed_shape_is_refused_before_allocating(tmp_path: Path) -> None:
    # One tensor record claiming 2**40 x 2**20 i32 elements in a 48-byte file.
    record = struct.pack("<QBB6x", 2, 2, 0) + struct.pack("<2Q", 2**40, 2**20)
    (tmp_path / "big.btf").write_bytes(struct.pack("<QQ", 1, 16) + record)
    message = error_of(str(tmp_path / "big.btf"), [str(tmp_path)], rank=2)
    assert "failed to read the data of tensor 0" in message


def test_bad_dtype_code_and_rank_are_not_echoed(tmp_path: Path) -> None:
    (tmp_path / "code.btf").write_bytes(struct.pack("<QQ", 1, 16) + struct.pack("<QBB6x", 1, 200, 0)
                                        + struct.pack("<Q", 1) + b"\0" * 4)
    message = error_of(str(tmp_path / "code.btf"), [str(tmp_path)])
    assert "not a BTF dtype" in message and "200" not in message
    (tmp_path / "rank.btf").write_bytes(struct.pack("<QQ", 1, 16)
                                        + struct.pack("<QBB6x", 10**15, 2, 0))
    message = error_of(str(tmp_path / "rank.btf"), [str(tmp_path)])
    assert "failed to read the shape" in message and str(10**15) not in message


def test_no_data_directories_allow_nothing(tmp_path: Path) -> None:
    write_btf(tmp_path / "t.btf", [np.array([1], np.int32)])
    assert NOT_UNDER in error_of(str(tmp_path / "t.btf"), [])


# -- bef_executor: defaults and --data_dir -------------------------------------------------------


def bef_executor(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytfrt.tools.bef_executor", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=60)


def test_bef_executor_defaults_to_cwd_and_program_directory(tmp_path: Path) -> None:
    prog_dir, work, other = tmp_path / "prog", tmp_path / "work", tmp_path / "other"
    for d in (prog_dir, work, other):
        d.mkdir()
    write_btf(prog_dir / "p.btf", [np.array([1, 2], np.int32)])
    write_btf(work / "w.btf", [np.array([3, 4], np.int32)])
    write_btf(other / "o.btf", [np.array([5, 6], np.int32)])
    for name, path in (("p", prog_dir / "p.btf"), ("w", "w.btf"), ("o", other / "o.btf")):
        (prog_dir / f"{name}.mlir").write_text(read_btf(str(path)))
    assert "values = [1, 2]" in bef_executor(str(prog_dir / "p.mlir"), cwd=work).stdout
    assert "values = [3, 4]" in bef_executor(str(prog_dir / "w.mlir"), cwd=work).stdout
    denied = bef_executor(str(prog_dir / "o.mlir"), cwd=work)
    assert denied.returncode == 1 and NOT_UNDER in denied.stderr
    allowed = bef_executor(f"--data_dir={other}", str(prog_dir / "o.mlir"), cwd=work)
    assert "values = [5, 6]" in allowed.stdout
    # Naming a data directory replaces the defaults.
    only_other = bef_executor(f"--data_dir={other}", str(prog_dir / "w.mlir"), cwd=work)
    assert NOT_UNDER in only_other.stderr


def test_bef_executor_rejects_a_missing_data_dir(tmp_path: Path) -> None:
    out = bef_executor("--data_dir=/no/such/dir", "x.mlir", cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.strip() == "bef_executor: --data_dir '/no/such/dir' is not a directory"
