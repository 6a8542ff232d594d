"""Built-in kernel libraries: ``basic`` (the ``tfrt.*`` kernels) and ``test_kernels``
(``tfrt_test.*``, ``vt.*``, ``tfrt_tutorial.*``).

Each library exposes ``register(registry)``; the registry loads them lazily by kernel-name
prefix (``BUILTIN_LIBRARIES`` in :mod:`pytfrt.kernel_libraries`).  Kernels are plain typed
functions marked with ``@kernel`` and can be called directly.  Control-flow kernels run
sub-functions only through :class:`pytfrt.host.Function`; nothing here imports the executor.
"""
