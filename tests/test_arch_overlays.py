"""The shipped arch overlays (causal-conv1d-archs, mamba-archs) on the real upstream sources at their
pins (../shared/sources): they apply, verify and restore with the overlay machinery, and the build file
they leave reads the target's archs and the jobs formula's thread count. The builds themselves are
proven by the cuda-smoke image (sm_90a only) and on the GPU machine (docs/BENCHMARKS.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from megacpp_env.cli import main
from megacpp_env.facts import pyscan
from megacpp_env.spec import load_spec
from tests.fixtures.spec import REPO_ROOT
from tests.fixtures.srcbuild import SHARED_BUNDLES, shared_sources  # noqa: F401  (fixture)

OVERLAYS = {"causal_conv1d": "causal-conv1d-archs", "mamba_ssm": "mamba-archs"}


def _clone_at_pin(bundle: Path, commit: str, dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(bundle), str(dest)], check=True, capture_output=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", commit], check=True, capture_output=True)
    return dest


@pytest.mark.parametrize("source", sorted(OVERLAYS))
def test_arch_overlay_on_the_pinned_source(source, shared_sources, tmp_path, capsys):  # noqa: F811
    spec = load_spec(REPO_ROOT / "stack.yaml")
    src = spec.source(source)
    assert src.overlay == OVERLAYS[source]
    checkout = _clone_at_pin(shared_sources / SHARED_BUNDLES[src.repo], src.commit, tmp_path / source)
    pristine = (checkout / "setup.py").read_bytes()
    before = {hit.name for hit in pyscan.scan_file(checkout / "setup.py", "setup.py").env}
    assert "MEGACPP_CUDA_ARCHS" not in before and "NVCC_THREADS" not in before  # upstream reads neither

    assert main(["overlay", "apply", src.overlay, "--to", str(checkout)]) == 0
    assert main(["overlay", "verify", src.overlay, "--to", str(checkout)]) == 0
    capsys.readouterr()
    assert main(["verify-checkout", str(checkout), "--expect", source]) == 0  # the source's overlay vouches
    assert f"(overlay {src.overlay} applied, as its manifest says)" in capsys.readouterr().out
    text = (checkout / "setup.py").read_text()
    after = {hit.name for hit in pyscan.scan_file(checkout / "setup.py", "setup.py").env}  # same path, new bytes
    assert {"MEGACPP_CUDA_ARCHS", "NVCC_THREADS"} <= after
    assert '["--threads", "4"]' not in text  # the hard-coded count is gone
    assert text.count("arch=compute_{arch},code=sm_{arch}") == 1
    diff = subprocess.run(["git", "-C", str(checkout), "diff", "--numstat"], check=True, capture_output=True,
                          text=True).stdout.split()  # fmt: skip
    assert diff[2:] == ["setup.py"] and int(diff[1]) == 1  # one line replaced, the rest added

    assert main(["overlay", "restore", src.overlay, "--to", str(checkout)]) == 0
    assert (checkout / "setup.py").read_bytes() == pristine
    assert main(["verify-checkout", str(checkout), "--expect", source]) == 0
