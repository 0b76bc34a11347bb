"""`megacpp-env verify-image IMAGE`: the image against the SBOM baked into it at build (or `--sbom FILE`),
then a snapshot inside the image diffed against the snapshot baked at build."""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import add_json
from megacpp_env.layout import PLATFORMS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("image", help="image reference (tag or id)")
    parser.add_argument(
        "--platform", default="", choices=PLATFORMS, help="platform of the image (for emulated arm64 images)"
    )
    parser.add_argument(
        "--sbom", metavar="FILE", default="",
        help="check against this CycloneDX SBOM (megacpp-env sbom TARGET --output FILE) instead of the baked one",
    )  # fmt: skip
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env import build

    sbom = getattr(args, "sbom", "") or ""  # a Namespace made by a caller, not the parser, may lack it
    report = build.verify(args.image, platform=args.platform, as_json=args.json, sbom_file=sbom)
    sys.stdout.write(report.output)
    if report.stderr:
        sys.stderr.write(report.stderr)
    return 0 if report.ok else 1
