"""``pytfrt.compiler.frontends.tf_import``: TensorFlow's start-up lines are dropped from stderr,
everything else written there during the import still arrives."""

from __future__ import annotations

import os
import sys

import pytest

from pytfrt.compiler.frontends.tf_import import START_UP_NOISE, filtered_stderr

# Lines as TensorFlow 2.20 prints them at import.
NOISE = (
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    b"I0000 00:00:1795942968.026310   11781 port.cc:153] oneDNN custom operations are on. You "
    b"may see slightly different numerical results due to floating-point round-off errors from "
    b"different computation orders. To turn them off, set the environment variable "
    b"`TF_ENABLE_ONEDNN_OPTS=0`.\n"
    b"I0000 00:00:1795942968.174263   11781 cpu_feature_guard.cc:227] This TensorFlow binary is "
    b"optimized to use available CPU instructions in performance-critical operations.\n"
    b"To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild "
    b"TensorFlow with the appropriate compiler flags.\n"
)


def test_start_up_lines_are_dropped_and_the_rest_kept(capfd: pytest.CaptureFixture[str]) -> None:
    with filtered_stderr():
        os.write(2, b"E0000 a real error from C++\n" + NOISE)
        print("a warning from Python", file=sys.stderr)
        os.write(2, b"I0000 00:00:1.0 1 port.cc:153] something else at INFO\n")
    out, err = capfd.readouterr()
    assert out == ""
    # (pytest's sys.stderr writes to its capture file itself, not through descriptor 2)
    assert sorted(err.splitlines()) == ["E0000 a real error from C++",
                                        "I0000 00:00:1.0 1 port.cc:153] something else at INFO",
                                        "a warning from Python"]
    print("after", file=sys.stderr)  # descriptor 2 is back where it was
    assert capfd.readouterr().err == "after\n"


def test_output_held_during_a_failing_block_is_still_written(
        capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ImportError), filtered_stderr():
        os.write(2, NOISE + b"why the import failed\n")
        raise ImportError("no module named tensorflow")
    assert capfd.readouterr().err == "why the import failed\n"


def test_every_noise_line_matches() -> None:
    assert all(START_UP_NOISE.match(line) for line in NOISE.splitlines())
