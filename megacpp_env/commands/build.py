"""`megacpp-env build TARGET`: the image of a target, in three steps (see megacpp_env/build.py): the
source mirror on this host, the locked dependencies with network, then the per-source stages and
the image with no network at all."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from megacpp_env.commands._common import add_json, load

if TYPE_CHECKING:
    from megacpp_env.build import BuildPlan
    from megacpp_env.spec.model import Spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="target to build (see `megacpp-env targets`)")
    parser.add_argument("--platform", default="", help="linux/amd64 or linux/arm64 (default: the target's first)")
    parser.add_argument("--base-image", default="", metavar="REF", help="override the base image for this platform")
    parser.add_argument("--tag", default="", help="image tag (default: megacpp/<target>:<content hash>)")
    parser.add_argument(
        "--registry",
        default=os.environ.get("MEGACPP_REGISTRY", ""),
        metavar="HOST[:PORT]",
        help="tag HOST[:PORT]/megacpp/<target>:<content tag> by default (default: $MEGACPP_REGISTRY)",
    )
    parser.add_argument(
        "--push", action="store_true", help="push the image (and, classic build, its cache image); report the digest"
    )
    parser.add_argument(
        "--skip-base-check",
        action="store_true",
        help="build from a pinned base digest without checking that its tag still names it",
    )
    parser.add_argument("--builder", default="", metavar="NAME", help="BuildKit builder (uses docker buildx)")
    parser.add_argument("--cache-from", action="append", default=[], metavar="X", help="BuildKit cache source")
    parser.add_argument("--cache-to", action="append", default=[], metavar="X", help="BuildKit cache export (buildx)")
    parser.add_argument(
        "--network",
        default="",
        metavar="MODE",
        help="network of the deps build (default: Docker's; host with --mirror); sources never get one",
    )
    parser.add_argument(
        "--source-from", action="append", default=[], metavar="URL=PATH",
        help="mirror the source pinned at URL from PATH (a git bundle or repository); repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--source-mirror", default="", metavar="DIR", help="fill the build's source mirror from this one (offline)"
    )
    parser.add_argument("--ca-bundle", default="", metavar="PATH", help="CA bundle, mounted as a BuildKit secret")
    parser.add_argument("--mirror", default="", metavar="DIR", help="install locked artifacts from this mirror only")
    parser.add_argument("--no-cache", action="store_true", help="ignore the layer cache (cache mounts are kept)")
    parser.add_argument("--dry-run", action="store_true", help="print the exact command line; build nothing")
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env import build, pinning
    from megacpp_env.ui import print_json

    spec = load(args)
    opts = build.BuildOptions(
        target=args.target,
        platform=args.platform,
        base_image=args.base_image,
        tag=args.tag,
        registry=args.registry,
        push=args.push,
        builder=args.builder,
        cache_from=tuple(args.cache_from),
        cache_to=tuple(args.cache_to),
        network=args.network,
        ca_bundle=args.ca_bundle,
        mirror=args.mirror,
        no_cache=args.no_cache,
        source_from=tuple(args.source_from),
        source_mirror=args.source_mirror,
    )
    plan = build.plan_build(spec, opts, docker_bin=build.docker_for(dry_run=args.dry_run))
    if args.dry_run:
        return _dry_run(spec, plan, args.json)
    build.refuse_if_stale(spec, plan.target, plan.platform)
    if not args.skip_base_check and not args.base_image:
        pinning.refuse_if_base_moved(spec, plan.target, plan.platform)
    with _log_view(plan, as_json=args.json) as on_line:
        result = build.execute(plan, on_line=on_line)
    if args.json:
        print_json({"ok": True, **result.to_dict()})
        return 0
    print(
        f"built {result.plan.tag} ({result.plan.platform}) in {result.seconds:.1f}s; "
        f"snapshot {result.snapshot_digest or 'not read'}"
    )
    if result.pushed:
        p = result.pushed
        print(f"pushed {p.ref}: {p.digest} (pull by digest: {p.pull_ref})")
        print(f"pushed build cache {p.cache_ref}: {p.cache_digest} (re-use it: --cache-from {p.cache_ref})")
        if p.deps_cache_ref:
            print(f"pushed deps build cache {p.deps_cache_ref}: {p.deps_cache_digest} (--cache-from it too)")
    return 0


STEP = re.compile(r"^#(\d+) \[([^\]]+)\] (.*)$")


@contextlib.contextmanager
def _log_view(plan: BuildPlan, *, as_json: bool) -> Iterator[Callable[[str], None]]:
    """Where BuildKit's log goes. On a terminal: one status line with the running step (``-v``
    streams the whole log instead). Elsewhere (CI, pipes, --json): the whole log on stderr, for
    the record. ``-q``: nothing (a failure still names its step and shows the end of its log)."""
    from megacpp_env.ui import QUIET, VERBOSE, Progress, settings

    verbosity = settings().verbosity
    progress = Progress(enabled=False if as_json or verbosity >= VERBOSE else None)
    start = time.monotonic()

    def status(line: str) -> None:
        if m := STEP.match(line):
            progress.show(f"{plan.target} {plan.platform} {time.monotonic() - start:5.0f}s #{m[1]} [{m[2]}] {m[3]}")

    def stream(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    def nothing(_line: str) -> None:
        return

    with progress:
        if progress.enabled:
            yield status
        else:
            yield nothing if verbosity <= QUIET else stream


def _dry_run(spec: Spec, plan: BuildPlan, as_json: bool) -> int:
    from megacpp_env import build
    from megacpp_env.ui import print_json

    problems = build.preflight(spec, plan.target, plan.platform)
    if as_json:
        print_json({**plan.to_dict(), "would_refuse": problems})
        return 0
    print("\n".join(plan.script()))
    for problem in problems:
        print(f"# a real build would refuse: {problem}")
    return 0
