"""`megacpp-env sbom TARGET [--platform P] [--image IMAGE] [--output FILE]`: the CycloneDX SBOM of a target's
image, from the committed locks, the pinned sources and their fetches (with purls and overlay digests), artifacts
and base image; with `--image`, also what that built image holds (OS and Debian packages, licenses)."""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import load
from megacpp_env.layout import PLATFORMS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="the target (see `megacpp-env targets`)")
    parser.add_argument("--platform", metavar="P", choices=PLATFORMS, help="the platform (default: the target's first)")
    parser.add_argument(
        "--image", metavar="IMAGE", default="",
        help="a built image of the target: add what it holds (OS, Debian packages, licenses), as build bakes it",
    )  # fmt: skip
    parser.add_argument("--output", metavar="FILE", help="write it here (atomically) instead of stdout")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from megacpp_env.sbom import target_sbom

    output = Path(args.output) if args.output else None
    image = getattr(args, "image", "") or ""  # a Namespace made by a caller, not the parser, may lack it
    sys.stdout.write(target_sbom(load(args), args.target, args.platform, output, image))
    return 0
