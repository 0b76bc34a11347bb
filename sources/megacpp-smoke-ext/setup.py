"""Build the C extension megacpp_smoke_ext._core.

Like mamba_ssm's and causal_conv1d's download-or-build switch, the build refuses to run unless
MEGACPP_SMOKE_EXT_FORCE_BUILD=TRUE: the image build sets it from stack.yaml's build_env, so a build
that did not get the spec's environment fails loudly instead of producing something else.
The value seen at build time is recorded in megacpp_smoke_ext/_build_info.py of the built package.
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

FORCE_BUILD = "MEGACPP_SMOKE_EXT_FORCE_BUILD"


def _forced() -> str:
    return os.environ.get(FORCE_BUILD, "")


class ForcedBuildExt(build_ext):
    def run(self) -> None:
        if _forced().upper() != "TRUE":
            raise SystemExit(
                f"megacpp-smoke-ext: no prebuilt binaries exist; set {FORCE_BUILD}=TRUE to build "
                "the C extension from source (stack.yaml: sources.megacpp_smoke_ext.build_env)"
            )
        super().run()


class RecordingBuildPy(build_py):
    def run(self) -> None:
        super().run()
        out = Path(self.build_lib) / "megacpp_smoke_ext" / "_build_info.py"
        out.write_text(f"FORCE_BUILD = {_forced()!r}\n", encoding="utf-8")


setup(
    ext_modules=[Extension("megacpp_smoke_ext._core", ["megacpp_smoke_ext/_core.c"])],
    cmdclass={"build_ext": ForcedBuildExt, "build_py": RecordingBuildPy},
)
