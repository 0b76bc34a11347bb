"""Issue 31, round 4, the spec's env policy (defect 10): variables that load code, under `check`.

    python -m benchmarks.adversarial_r4.policy      prints the counts as JSON

PYTHONWARNINGS (a filter's category names a module to import), CMAKE_TOOLCHAIN_FILE and its siblings
(project includes, make-rules overrides, compiler and linker launchers), and the same handed to cmake in
CMAKE_ARGS or SKBUILD_CMAKE_ARGS (-D..., -C, -P, --toolchain), each in env.build, env.runtime and a
source's build_env: `check` exiting 0 is a false ok. Control: the shipped spec passes.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.adversarial_r4._common import Counts, cli  # noqa: E402

NAMES = {
    "PYTHONWARNINGS": "ignore::evil.Module", "CMAKE_TOOLCHAIN_FILE": "/tmp/evil.cmake",
    "CMAKE_PROJECT_INCLUDE": "/tmp/evil.cmake", "CMAKE_PROJECT_INCLUDE_BEFORE": "/tmp/evil.cmake",
    "CMAKE_PROJECT_demo_INCLUDE": "/tmp/evil.cmake", "CMAKE_USER_MAKE_RULES_OVERRIDE": "/tmp/evil.cmake",
    "CMAKE_USER_MAKE_RULES_OVERRIDE_CXX": "/tmp/evil.cmake", "CMAKE_CXX_COMPILER_LAUNCHER": "/tmp/evil",
    "CMAKE_CUDA_COMPILER_LAUNCHER": "/tmp/evil", "CMAKE_C_LINKER_LAUNCHER": "/tmp/evil",
    "CMAKE_PROJECT_TOP_LEVEL_INCLUDES": "/tmp/evil.cmake",
}  # fmt: skip
CMAKE_ARGS = ["-DCMAKE_TOOLCHAIN_FILE=/tmp/e.cmake", "-G Ninja -DCMAKE_TOOLCHAIN_FILE:FILEPATH=/e.cmake",
              "-D CMAKE_PROJECT_INCLUDE=/e.cmake", "-DX=1 -C /tmp/init.cmake", "-C/tmp/init.cmake", "-P /e.cmake",
              "--toolchain /e.cmake", "--toolchain=/e.cmake", "-DCMAKE_CUDA_COMPILER_LAUNCHER=/evil",
              "'-DCMAKE_PROJECT_INCLUDE_BEFORE=/x y.cmake'"]  # fmt: skip


def _spec(tmp: Path, n: int, where: str, name: str, value: str) -> Path:
    data = yaml.safe_load((ROOT / "stack.yaml").read_text())
    if where == "build_env":
        data["sources"]["megacpp_smoke_ext"]["build_env"][name] = value
    else:
        data["targets"]["smoke"].setdefault("env", {}).setdefault(where, {})[name] = value
    path = tmp / f"spec-{n}" / "stack.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run(tmp: Path) -> dict[str, int]:
    counts = Counts()
    rc, _out, err = cli(counts, ["check", "--spec", str(ROOT / "stack.yaml")])
    assert rc == 0, err  # the control
    cases = list(NAMES.items()) + [(var, v) for var in ("CMAKE_ARGS", "SKBUILD_CMAKE_ARGS")
                                                  for v in CMAKE_ARGS]  # fmt: skip
    n = 0
    for name, value in cases:
        for where in ("build", "runtime", "build_env"):
            n += 1
            rc, _out, _err = cli(counts, ["check", "--spec", str(_spec(tmp, n, where, name, value))])
            counts["false_oks"] += rc == 0
    return counts


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="adv-r4-policy-") as scratch:
        print(json.dumps(run(Path(scratch)), sort_keys=True))
