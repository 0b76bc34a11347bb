"""`megacpp-env verify-image IMAGE`: snapshot inside the image, diff against the snapshot baked at build."""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import add_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("image", help="image reference (tag or id)")
    parser.add_argument("--platform", default="", help="platform of the image (for emulated arm64 images)")
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env import build

    report = build.verify_image(args.image, platform=args.platform, as_json=args.json)
    sys.stdout.write(report.output)
    if report.stderr:
        sys.stderr.write(report.stderr)
    return 0 if report.ok else 1
