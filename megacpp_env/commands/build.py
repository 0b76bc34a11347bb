"""`megacpp-env build TARGET`: the image of a target in three steps (megacpp_env/build/): the source
mirror on this host, the locked dependencies with network, the sources and the image with none."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from megacpp_env.commands._common import add_json, load
from megacpp_env.layout import PLATFORMS

if TYPE_CHECKING:
    from megacpp_env.build import BuildPlan


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="target to build (see `megacpp-env targets`)")
    parser.add_argument("--platform", default="", choices=PLATFORMS, help="the platform (default: the target's first)")
    parser.add_argument("--base-image", default="", metavar="REF", help="override the base image for this platform")
    parser.add_argument("--tag", default="", help="image tag (default: megacpp/<target>:<content hash>)")
    parser.add_argument(
        "--registry", default=os.environ.get("MEGACPP_REGISTRY", ""), metavar="HOST[:PORT]",
        help="tag HOST[:PORT]/megacpp/<target>:<content tag> by default (default: $MEGACPP_REGISTRY)",
    )  # fmt: skip
    parser.add_argument("--push", action="store_true",
                        help="push the image (and, classic build, its cache image); report the digest")  # fmt: skip
    parser.add_argument(
        "--skip-base-check", action="store_true",
        help="build from a pinned base digest without checking that its tag still names it",
    )  # fmt: skip
    parser.add_argument("--builder", default="", metavar="NAME", help="BuildKit builder (uses docker buildx)")
    parser.add_argument("--cache-from", action="append", default=[], metavar="X", help="BuildKit cache source")
    parser.add_argument("--cache-to", action="append", default=[], metavar="X", help="BuildKit cache export (buildx)")
    parser.add_argument(
        "--network", default="", metavar="MODE",
        help="network of the deps build (default: Docker's; host with --mirror); sources never get one",
    )  # fmt: skip
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
    from megacpp_env import build
    from megacpp_env.ui import print_json

    names = {f.name for f in dataclasses.fields(build.BuildOptions)}  # each option is the flag of that name
    given: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in vars(args).items() if k in names}
    opts = build.BuildOptions(**given)
    view = functools.partial(_log_view, as_json=args.json)
    done = build.run_build(load(args), opts, dry_run=args.dry_run, check_base=not args.skip_base_check, log_view=view)
    if done.result is None:
        return _dry_run(done.plan, done.would_refuse, args.json)
    result = done.result
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
    start, what = time.monotonic(), f"{plan.target.name} {plan.platform}"

    def status(line: str) -> None:
        if m := STEP.match(line):
            progress.show(f"{what} {time.monotonic() - start:5.0f}s #{m[1]} [{m[2]}] {m[3]}")

    stream = functools.partial(print, file=sys.stderr, flush=True)
    with progress:
        yield status if progress.enabled else (lambda _line: None) if verbosity <= QUIET else stream


def _dry_run(plan: BuildPlan, problems: tuple[str, ...], as_json: bool) -> int:
    from megacpp_env.ui import print_json

    if as_json:
        print_json({**plan.to_dict(), "would_refuse": list(problems)})
        return 0
    print("\n".join(plan.script()))
    for problem in problems:
        print(f"# a real build would refuse: {problem}")
    return 0
