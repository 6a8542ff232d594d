"""The ``pytfrt`` umbrella command: ``pytfrt demo`` and, later, ``bench`` and ``profile``."""

from __future__ import annotations

import argparse
import sys

from pytfrt.host import HostContext, run_when_ready


def _demo(args: argparse.Namespace) -> int:
    """A small built-in program on the host runtime (until the XOR example lands)."""
    with HostContext(args.work_queue) as host:
        squares = [host.enqueue_work(lambda i=i: i * i) for i in range(10)]
        done = host.enqueue_work(lambda: None)
        run_when_ready(squares, lambda: done)
        host.await_values(squares)
        total = sum(v.get() for v in squares)
        print(f"sum of squares 0..9 computed as 10 AsyncValue tasks on '{host.work_queue.name}': "
              f"{total}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``pytfrt`` command."""
    parser = argparse.ArgumentParser(prog="pytfrt", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the main demo")
    demo.add_argument("--work_queue_type", dest="work_queue", default="mstd:2")
    demo.set_defaults(func=_demo)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
