"""Build script for the optional C extension ``pytfrt._eager_fast`` (docs/eager.md).

Everything else is configured in ``pyproject.toml``.  The extension is optional: if it cannot be
compiled (no C compiler), the install goes on and ``pytfrt.eager`` runs its pure-Python fast
path instead.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "pytfrt._eager_fast",
            sources=["src/pytfrt/_eager_fast.c"],
            optional=True,
        )
    ],
)
