"""Build script for the optional C extensions ``pytfrt._eager_fast`` (docs/eager.md) and
``pytfrt.serving._json_scan`` (docs/serving.md).

Everything else is configured in ``pyproject.toml``.  The extensions are optional: if one cannot be
compiled (no C compiler), the install goes on and ``pytfrt.eager`` runs its pure-Python fast
path instead (and ``pytfrt.serving.fast_json`` its Numba scan).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "pytfrt._eager_fast",
            sources=["src/pytfrt/_eager_fast.c"],
            optional=True,
        ),
        Extension(
            "pytfrt.serving._json_scan",
            sources=["src/pytfrt/serving/_json_scan.c"],
            optional=True,
        ),
    ],
)
