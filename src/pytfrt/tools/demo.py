"""``pytfrt demo``: the main job.

Until the XOR example lands this runs a small built-in program on the host runtime: ten
AsyncValue tasks on the chosen work queue, awaited and summed.
"""

from __future__ import annotations

import argparse

from pytfrt.host import HostContext


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the demo's options."""
    parser.add_argument("--work_queue_type", dest="work_queue", default="mstd:2")


def run(args: argparse.Namespace) -> int:
    """Run the demo; returns the exit status."""
    with HostContext(args.work_queue) as host:
        squares = [host.enqueue_work(lambda i=i: i * i) for i in range(10)]
        host.await_values(squares)
        total = sum(v.get() for v in squares)
        print(
            f"sum of squares 0..9 computed as 10 AsyncValue tasks on '{host.work_queue.name}': "
            f"{total}"
        )
    return 0
