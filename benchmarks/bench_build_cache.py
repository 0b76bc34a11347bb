"""A fresh builder with and without the pushed build caches (issue 22, item 4): the smoke target.

    python benchmarks/bench_build_cache.py [--registry 127.0.0.1:5000] [--ca-bundle PATH]

Needs root (a second dockerd and its bridge, tests/fixtures/dockerd2.py), the shared Docker daemon with
the base image, the loopback registry (scripts/registry-up.sh) and the smoke source server
(`bash scripts/smoke-source.sh --serve`). Never prunes the shared daemon's cache. Rows, each a full
`build` (source mirror, deps build, sealed build, label step; push where said):
  fresh, no cache   a new dockerd (empty data root, base image only), nothing imported: every step runs;
                    its deps build uses --network host (the bridge of that daemon has no route out)
  first builder     the shared daemon (its own warm cache): `build --tag R/megacpp-bench/cache-N:smoke
                    --push`, which pushes the image, its cache image and the deps cache image
  fresh, pushed     another new dockerd: the same `build --push`, importing both cache images
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from megacpp_env import build, docker  # noqa: E402
from megacpp_env.spec import load_spec  # noqa: E402
from tests.fixtures.docker import ca_bundle  # noqa: E402
from tests.fixtures.dockerd2 import second_dockerd  # noqa: E402
from tests.test_build_cache_docker import local_tags  # noqa: E402


def run(opts: build.BuildOptions) -> dict[str, object]:
    spec = load_spec(ROOT / "stack.yaml")
    start = time.monotonic()
    result = build.execute(build.plan_build(spec, opts), on_line=lambda _line: None)
    return {
        "wall_s": round(time.monotonic() - start, 1),
        "builds_s": round(result.seconds, 1),
        "steps_run": len(result.executed),
        "steps_cached": result.cached,
    }


def on_fresh_daemon(opts: build.BuildOptions) -> dict[str, object]:
    with second_dockerd() as host:
        os.environ["DOCKER_HOST"] = host
        try:
            return run(opts)
        finally:
            del os.environ["DOCKER_HOST"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", default=os.environ.get("MEGACPP_TEST_REGISTRY", "127.0.0.1:5000"))
    parser.add_argument("--ca-bundle", default=ca_bundle())
    args = parser.parse_args()
    tag = f"{args.registry}/megacpp-bench/cache-{uuid.uuid4().hex[:12]}:smoke"
    pushed = build.BuildOptions(target="smoke", tag=tag, push=True, ca_bundle=args.ca_bundle)
    rows = {
        "fresh builder, no cache": on_fresh_daemon(
            build.BuildOptions(target="smoke", network="host", ca_bundle=args.ca_bundle)
        ),
        "first builder (shared daemon), --push": run(pushed),
        "fresh builder, the pushed caches": on_fresh_daemon(pushed),
    }
    for ref in local_tags(tag):  # the shared daemon keeps no tag of this run
        docker.run([docker.binary(), "image", "rm", ref], check=False)
    print("| row | wall | docker builds | steps run | steps cached |\n|---|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['wall_s']} s | {row['builds_s']} s | {row['steps_run']} | {row['steps_cached']} |")
    print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
