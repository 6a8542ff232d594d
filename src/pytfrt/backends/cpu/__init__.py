"""The CPU backend: tensor math on NumPy (:mod:`.ops`, :mod:`.nn_ops`) and its kernels.

* :mod:`pytfrt.backends.cpu.ops` / :mod:`pytfrt.backends.cpu.nn_ops` -- plain functions on
  ndarrays: a shape rule per op (dims -> dims, raising :class:`~.ops.OpError` with TFRT's
  message) and a compute function, shared by graph kernels and eager op handlers.
* :mod:`pytfrt.backends.cpu.kernels` -- ``register(registry)`` for ``eigen.*`` and the CPU
  ``tfrt_test.*`` tensor kernels (loaded lazily by the built-in registry).
* :func:`provide_fused_segment_kernels` -- offers the C kernels of fused segments
  (:mod:`pytfrt.backends.cpu.fusible_kernels`) to the executor through
  :mod:`pytfrt.host.extensions`; the kernel libraries whose kernels can fuse call it when they
  are registered.

Depends on :mod:`pytfrt.host` and :mod:`pytfrt.tensor` (+ NumPy).

Floating-point overflow, invalid operations and division by zero follow IEEE semantics silently
(``inf``/``nan``), as TFRT's kernels do: NumPy's ``RuntimeWarning`` is ignored for warnings
raised from this package's modules only (a module-scoped warnings filter, idempotent).
"""

import warnings

warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"pytfrt\.backends\.cpu(\.|$)")


def provide_fused_segment_kernels() -> None:
    """Offer :mod:`pytfrt.backends.cpu.fusible_kernels` (imported on first use) to the executor."""
    from pytfrt.host import extensions

    extensions.provide(extensions.FUSED_SEGMENT_KERNELS, _load_fusible_kernels)


def _load_fusible_kernels() -> object:
    from pytfrt.backends.cpu import fusible_kernels

    return fusible_kernels
