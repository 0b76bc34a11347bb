"""Layer economics of the smoke image: cold build vs. rebuilds after touching one overlay file or the lock.

    python benchmarks/bench_build.py [--platform linux/amd64] [--ca-bundle PATH]

Needs the Docker daemon, the base image (scripts/make-base-image.sh) and the smoke source server
(`bash scripts/smoke-source.sh --serve`). Works on a private copy of the build context (never edits the
repository). Steps:
  cold     --no-cache: every layer runs (BuildKit cache mounts, i.e. pip's download cache and ccache,
           stay warm; the base image is local)
  noop     the same inputs again: everything cached
  overlay  one overlay file changed (content + its manifest sha256): only that source's overlay layers
           onward run
  lock     the lock export and pylock changed (a comment line): the lock stage and everything after it
           run; the toolchain layers stay cached
  tool     one file of the tool's own source changed: from the tool layer onward
Each line reports wall time (docker build + the metadata-only label step), the steps that ran, and the
ratio to the cold build.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from megacpp_env import build  # noqa: E402
from megacpp_env.spec import load_spec  # noqa: E402
from tests.fixtures.docker import copy_build_context  # noqa: E402


def touch_overlay(root: Path, n: int) -> str:
    manifest = root / "overlays" / "smoke-ext" / "manifest.toml"
    rel = "megacpp_smoke_ext/overlay_info.py"
    path = root / "overlays" / "smoke-ext" / "files" / rel
    old = hashlib.sha256(path.read_bytes()).hexdigest()
    path.write_text(path.read_text() + f"# bench edit {n}\n")
    new = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest.write_text(manifest.read_text().replace(old, new))
    return f"overlays/smoke-ext/files/{rel}"


def touch_lock(root: Path, platform: str, n: int) -> str:
    slug = platform.replace("/", "-")
    for path in (root / "locks" / f"smoke.{slug}.requirements.txt", root / "locks" / f"pylock.smoke.{slug}.toml"):
        path.write_text(path.read_text() + f"# bench edit {n}\n")
    return f"locks/*smoke.{slug}*"


def touch_tool(root: Path, n: int) -> str:
    path = root / "megacpp_env" / "ui.py"
    path.write_text(path.read_text() + f"# bench edit {n}\n")
    return "megacpp_env/ui.py"


def run(root: Path, platform: str, ca: str, *, no_cache: bool = False, tag: str = "") -> build.BuildResult:
    spec = load_spec(root / "stack.yaml")
    opts = build.BuildOptions(target="smoke", platform=platform, ca_bundle=ca, no_cache=no_cache, tag=tag)
    return build.execute(build.plan_build(spec, opts))


def stages(result: build.BuildResult) -> str:
    names = sorted({re.match(r"\[([\w.-]+)", s)[1] for s in result.executed if re.match(r"\[([\w.-]+)", s)})
    return ", ".join(names) or "-"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--platform", default="linux/amd64")
    p.add_argument("--ca-bundle", default="/etc/ssl/certs/ca-certificates.crt")
    p.add_argument(
        "--cold-seconds",
        type=float,
        default=0.0,
        help="skip the --no-cache build and use this measured cold time (slow arm64 emulation)",
    )
    args = p.parse_args()
    ca = args.ca_bundle if Path(args.ca_bundle).is_file() else ""
    with tempfile.TemporaryDirectory(prefix="megacpp-bench-") as tmp:
        root = copy_build_context(Path(tmp))
        rows = []
        first = run(root, args.platform, ca, no_cache=not args.cold_seconds)
        rows.append(
            ("cold (--no-cache)" if not args.cold_seconds else "first build (layer cache as found)", "-", first)
        )
        rows.append(("no change", "-", run(root, args.platform, ca)))
        rows.append(("one overlay file", touch_overlay(root, 1), run(root, args.platform, ca)))
        rows.append(("lock", touch_lock(root, args.platform, 1), run(root, args.platform, ca)))
        rows.append(("tool source", touch_tool(root, 1), run(root, args.platform, ca)))
    total = args.cold_seconds or first.seconds + first.label_seconds
    print(f"platform {args.platform}; cold build {total:.1f} s" + (" (given)" if args.cold_seconds else ""))
    print("| change | file | wall s | % of cold | steps run | stages that ran |")
    print("|---|---|---|---|---|---|")
    for label, changed, r in rows:
        secs = r.seconds + r.label_seconds
        print(f"| {label} | `{changed}` | {secs:.1f} | {100 * secs / total:.0f}% | {len(r.executed)} | {stages(r)} |")
        if label == "lock":
            assert not any(s.startswith("[toolchain") for s in r.executed), "lock change rebuilt the toolchain"
        if label == "one overlay file":
            assert not any(s.startswith(("[toolchain", "[lock", "[deps")) for s in r.executed)


if __name__ == "__main__":
    main()
