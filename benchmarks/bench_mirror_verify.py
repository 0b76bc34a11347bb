"""How long a mirror-sources re-run takes to verify a mirror (issue 19, item 7): fill a mirror of the
pinned mamba and causal-conv1d sources from ../shared/sources' bundles, then re-run it (best of 5).

    python benchmarks/bench_mirror_verify.py [ROOT]     # ROOT: the checkout whose package to time
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
sys.path.insert(0, str(ROOT))

from megacpp_env.spec import load_spec  # noqa: E402
from megacpp_env.srcbuild.mirror import MirrorRequest, Pin, mirror_sources, parse_rewrite  # noqa: E402
from tests.fixtures.srcbuild import SHARED_BUNDLES, shared_sources_dir  # noqa: E402


def timed(fn: object) -> float:
    start = time.monotonic()
    fn()  # type: ignore[operator]
    return time.monotonic() - start


def main() -> None:
    spec = load_spec(ROOT / "stack.yaml")
    shared = shared_sources_dir()
    assert shared is not None, "../shared/sources is not there"
    for name in ("mamba_ssm", "causal_conv1d"):
        src = spec.sources[name]
        rewrites = dict([parse_rewrite(f"{src.repo}={shared / SHARED_BUNDLES[src.repo]}")])
        req = MirrorRequest(source=name, pins=(Pin(url=src.repo, commit=src.commit),))
        with tempfile.TemporaryDirectory() as d:
            fill = timed(lambda: mirror_sources(Path(d), [req], rewrites=rewrites))  # noqa: B023
            rerun = min(timed(lambda: mirror_sources(Path(d), [req], rewrites=rewrites)) for _ in range(5))  # noqa: B023
            (again,) = mirror_sources(Path(d), [req], rewrites=rewrites)
        print(f"{name}: fill {fill:.2f}s; re-run ({again.action}) best of 5: {rerun:.3f}s")


if __name__ == "__main__":
    main()
