"""The ``tfrt_translate``  tool (placeholder until its issue lands)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Print that the tool is not yet available and exit with status 1."""
    print("tfrt_translate: not yet available in this version of pytfrt", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
