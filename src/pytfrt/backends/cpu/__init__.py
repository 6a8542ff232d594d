"""The CPU backend: tensor math on NumPy (:mod:`.ops`, :mod:`.nn_ops`) and its kernels.

* :mod:`pytfrt.backends.cpu.ops` / :mod:`pytfrt.backends.cpu.nn_ops` -- plain functions on
  ndarrays: a shape rule per op (dims -> dims, raising :class:`~.ops.OpError` with TFRT's
  message) and a compute function, shared by graph kernels and eager op handlers.
* :mod:`pytfrt.backends.cpu.kernels` -- ``register(registry)`` for ``eigen.*`` and the CPU
  ``tfrt_test.*`` tensor kernels (loaded lazily by the built-in registry).

Depends on :mod:`pytfrt.host` and :mod:`pytfrt.tensor` (+ NumPy).
"""
