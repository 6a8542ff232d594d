"""Build script for the optional C extensions ``pytfrt._eager_fast`` (docs/eager.md) and
``pytfrt.serving._json_scan`` (docs/serving.md), and the gRPC APIs' compiled ``.proto`` files.

Everything else is configured in ``pyproject.toml``.  The extensions are optional: if one cannot be
compiled (no C compiler), the install goes on and ``pytfrt.eager`` runs its pure-Python fast
path instead (and ``pytfrt.serving.fast_json`` its Numba scan).  ``build_py`` compiles
``src/pytfrt/serving/protos/*.proto`` with ``grpcio-tools`` (the ``serve`` extra) into the
package when it is installed at build time; otherwise (and in source checkouts) the server
compiles them on first use into a cache (``pytfrt.serving.protos``).
"""

import importlib.util
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py


class BuildPyWithProtos(build_py):
    """``build_py``, then the descriptor set of the gRPC APIs next to their ``.proto`` files."""

    def run(self) -> None:
        super().run()
        source = Path(__file__).parent / "src" / "pytfrt" / "serving" / "protos" / "__init__.py"
        spec = importlib.util.spec_from_file_location("_pytfrt_protos", source)
        assert spec is not None and spec.loader is not None
        protos = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(protos)
        out = Path(self.build_lib) / "pytfrt" / "serving" / "protos"
        try:
            protos.compile_protos(out / protos.descriptor_file_name())
        except RuntimeError as exc:  # no grpcio-tools at build time: compiled on first use
            print(f"note: gRPC protos not compiled at build time ({exc})")


setup(
    cmdclass={"build_py": BuildPyWithProtos},
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
