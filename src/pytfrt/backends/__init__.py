"""Device backends: kernels and ops for a device (only the CPU backend, :mod:`.cpu`, today)."""
