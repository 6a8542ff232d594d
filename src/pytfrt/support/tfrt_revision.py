"""Which TFRT to behave as where TFRT's revisions disagree (``PYTFRT_TFRT_REVISION``).

pytfrt follows TFRT's main branch; a few behaviours that TFRT changed after 2022 can be switched
back to those of revision ``de22adc4`` (docs/conformance.md lists them), so that both revisions'
own test files run: a kernel error's code and its printed name, the debug info of a fused
location, the op name the generic printer gives a function, and where stream analysis puts a
return without operands.  Read at each use (a test may set it in-process).  Thread-safe.
"""

from __future__ import annotations

from pytfrt.config import choice

MAIN = "main"
DE22ADC4 = "de22adc4"


def revision() -> str:
    """``main`` (the default) or ``de22adc4``.

    Raises:
        pytfrt.config.ConfigError: ``PYTFRT_TFRT_REVISION`` holds another value.
    """
    return choice("PYTFRT_TFRT_REVISION")


def is_main() -> bool:
    """Whether TFRT's main-branch behaviour applies (``PYTFRT_TFRT_REVISION`` unset or ``main``)."""
    return revision() == MAIN
