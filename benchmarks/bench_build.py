"""What rebuilds, and how long it takes: the smoke target with two sources, one stage per source.

    python benchmarks/bench_build.py [--platform linux/amd64] [--ca-bundle PATH] [--cold-seconds S]

Needs the Docker daemon, the base image (scripts/make-base-image.sh) and the smoke source server
(`bash scripts/smoke-source.sh --serve`). Works on a private copy of the build context whose stack.yaml
adds a second tiny C extension (`megacpp_smoke_two`, a local git repository made here; its build reads
SMOKE_TWO_LIB_DIR, a declared build-time fetch of `smoke_two_lib`), so "only that source rebuilds" can be
seen. Never edits the repository. Each row is a full `build` (source mirror, deps build with network,
sources and image with none, label step):
  cold            --no-cache (BuildKit cache mounts, i.e. pip's download cache and ccache, stay warm)
  no change       everything cached
  one overlay     one file of overlays/smoke-ext changed (+ its manifest sha256): source-megacpp_smoke_ext
                  and the image stage run; source-megacpp_smoke_two stays cached
  tool, outside   megacpp_env/ui.py changed (not in the source-build closure): no source stage runs
  tool, inside    megacpp_env/srcbuild/jobs.py changed (in the closure): every source stage runs
  one pin         megacpp_smoke_two bumped to a new commit (re-rendered, re-mirrored): its stage only
  lock            the lock export and pylock changed (a comment line): the lock stage onward
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from megacpp_env import build, git, layout, render  # noqa: E402
from megacpp_env.spec import load_spec  # noqa: E402
from tests.fixtures.docker import copy_build_context  # noqa: E402
from tests.fixtures.git_repos import FILE_OK, IDENTITY  # noqa: E402
from tests.fixtures.srcbuild import LIB_FILES, TWO_FILES, TinyRepo, make_bare_repo, two_source_spec  # noqa: E402

SOURCES = ("source-megacpp_smoke_ext", "source-megacpp_smoke_two")


NONCE = uuid.uuid4().hex[:12]  # every edit is new to BuildKit's cache, also when the benchmark runs again


def touch_overlay(root: Path, n: int) -> str:
    manifest = root / "overlays" / "smoke-ext" / "manifest.toml"
    rel = "megacpp_smoke_ext/overlay_info.py"
    path = root / "overlays" / "smoke-ext" / "files" / rel
    old = hashlib.sha256(path.read_bytes()).hexdigest()
    path.write_text(path.read_text() + f"# bench edit {n} {NONCE}\n")
    manifest.write_text(manifest.read_text().replace(old, hashlib.sha256(path.read_bytes()).hexdigest()))
    return f"overlays/smoke-ext/files/{rel}"


def touch(root: Path, rel: str, n: int) -> str:
    path = root / rel
    path.write_text(path.read_text() + f"# bench edit {n} {NONCE}\n")
    return rel


def touch_lock(root: Path, platform: str, n: int) -> str:
    for path in (layout.requirements_export_path(root, "smoke", platform), layout.lock_path(root, "smoke", platform)):
        path.write_text(path.read_text() + f"# bench edit {n} {NONCE}\n")
    return f"locks/*smoke*{platform.replace('/', '-')}*"


def bump_two(root: Path, two: TinyRepo, work: Path) -> str:
    """A new upstream commit of megacpp_smoke_two, pinned in stack.yaml and re-rendered."""
    clone = work / "two-clone"
    git.run_git(["clone", "--quiet", str(two.path), str(clone)], config=FILE_OK)
    (clone / "README.md").write_text(f"a new upstream commit {NONCE}\n")
    git.run_git(["add", "-A"], clone)
    git.run_git(["commit", "--quiet", "-m", "bump"], clone, env=IDENTITY, config=FILE_OK)
    git.run_git(["push", "--quiet", "origin", "HEAD:main"], clone, config=FILE_OK)
    new = git.head_commit(clone) or ""
    spec_path = root / "stack.yaml"
    spec_path.write_text(spec_path.read_text().replace(two.commit, new))
    render.write(root, render.render_all(load_spec(spec_path)))
    return f"stack.yaml: megacpp_smoke_two {two.commit[:8]} -> {new[:8]}"


def run(root: Path, platform: str, ca: str, *, no_cache: bool = False) -> build.BuildResult:
    spec = load_spec(root / "stack.yaml")
    opts = build.BuildOptions(target="smoke", platform=platform, ca_bundle=ca, no_cache=no_cache,
                              tag="megacpp-bench/smoke-two:latest")  # fmt: skip
    return build.execute(build.plan_build(spec, opts))


def stages(result: build.BuildResult) -> list[str]:
    found = {m[1] for s in result.executed if (m := re.match(r"\[([\w.-]+)", s))}
    return sorted(found)


def check(label: str, ran: list[str]) -> None:
    """The claims the table makes, asserted."""
    expected = {
        "no change": [],
        "one overlay": ["image", "source-megacpp_smoke_ext"],
        "tool, outside the closure": ["image"],
        "one pin": ["image", "source-megacpp_smoke_two"],
    }
    if label in expected:
        assert ran == expected[label], (label, ran)
    if label == "tool, inside the closure":
        assert set(SOURCES) <= set(ran), ran
    if label == "lock":
        assert "toolchain" not in ran and set(SOURCES) <= set(ran), ran


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--platform", default="linux/amd64")
    p.add_argument("--ca-bundle", default="/etc/ssl/certs/ca-certificates.crt")
    p.add_argument("--cold-seconds", type=float, default=0.0,
                   help="skip the --no-cache build and use this measured cold time (slow arm64 emulation)")  # fmt: skip
    args = p.parse_args()
    ca = args.ca_bundle if Path(args.ca_bundle).is_file() else ""
    with tempfile.TemporaryDirectory(prefix="megacpp-bench-") as tmp:
        work = Path(tmp)
        two = make_bare_repo(work / "upstream" / "megacpp-smoke-two.git", TWO_FILES)
        lib = make_bare_repo(work / "upstream" / "smoke-two-lib.git", LIB_FILES)
        root = copy_build_context(work / "repo")
        two_source_spec(root, two, lib)
        render.write(root, render.render_all(load_spec(root / "stack.yaml")))
        first = run(root, args.platform, ca, no_cache=not args.cold_seconds)
        rows = [("cold (--no-cache)" if not args.cold_seconds else "first build (cache as found)", "-", first)]
        steps = [
            ("no change", lambda: "-"),
            ("one overlay", lambda: touch_overlay(root, 1)),
            ("tool, outside the closure", lambda: touch(root, "megacpp_env/ui.py", 1)),
            ("tool, inside the closure", lambda: touch(root, "megacpp_env/srcbuild/jobs.py", 1)),
            ("one pin", lambda: bump_two(root, two, work)),
            ("lock", lambda: touch_lock(root, args.platform, 1)),
        ]
        for label, change in steps:
            what = change()
            rows.append((label, what, run(root, args.platform, ca)))
    total = args.cold_seconds or first.seconds + first.label_seconds
    print(f"platform {args.platform}; cold build {total:.1f} s" + (" (given)" if args.cold_seconds else ""))
    print("| change | file | wall s | % of cold | steps run | stages that ran |")
    print("|---|---|---|---|---|---|")
    for label, changed, r in rows:
        secs = r.seconds + r.label_seconds
        ran = stages(r)
        print(f"| {label} | `{changed}` | {secs:.1f} | {100 * secs / total:.0f}% | {len(r.executed)} | "
              f"{', '.join(ran) or '-'} |")  # fmt: skip
        check(label, ran)


if __name__ == "__main__":
    main()
