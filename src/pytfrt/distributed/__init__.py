"""pytfrt.distributed: TFRT's distributed runtime on Ray (optional extra ``pytfrt[ray]``).

Work in progress; see ``docs/distributed.md``.  Ray is imported lazily, inside the functions
that need it, so importing this package never loads Ray.
"""
