"""Builds pypto_torch's native parts with CMake (see CMakeLists.txt).

`pip install --no-build-isolation -e .` (or a plain install, or a wheel) runs
CMake in build/cmake and puts the extension _C (one shared object holding the
runtime, the torch glue and the bindings) into the package.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name: str):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        # CMake always builds _C into the source package, so that later incremental
        # `cmake --build build/cmake` runs (the Makefile's) update an editable install;
        # setuptools then takes it from its usual place for wheels.
        target = Path(self.get_ext_fullpath(ext.name)).resolve()
        output_dir = ROOT / "pypto_torch"
        build_dir = Path(os.environ.get("PTO_BUILD_DIR", ROOT / "build" / "cmake"))
        build_dir.mkdir(parents=True, exist_ok=True)
        generator = ["-G", "Ninja"] if _has_ninja() else []
        subprocess.run(
            ["cmake", "-S", str(ROOT), "-B", str(build_dir), *generator,
             f"-DPTO_PYTHON_OUTPUT_DIR={output_dir}",
             f"-DPython3_EXECUTABLE={sys.executable}",
             f"-DPTO_BUILD_TESTS={os.environ.get('PTO_BUILD_TESTS', 'ON')}"],
            check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        subprocess.run(["cmake", "--build", str(build_dir), "-j", jobs], check=True)
        built = output_dir / target.name
        if built != target:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(built, target)


def _has_ninja() -> bool:
    from shutil import which

    return which("ninja") is not None


setup(
    ext_modules=[CMakeExtension("pypto_torch._C")],
    cmdclass={"build_ext": CMakeBuild},
)
