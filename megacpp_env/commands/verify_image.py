"""`megacpp-env verify-image IMAGE`: snapshot inside the image, diff against the snapshot baked at build."""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import add_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("image", help="image reference (tag or id)")
    parser.add_argument("--platform", default="", help="platform of the image (for emulated arm64 images)")
    parser.add_argument(
        "--sbom", metavar="FILE",
        help="the image's CycloneDX SBOM (megacpp-env sbom): also fail on a distribution in the image it does not list",
    )  # fmt: skip
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env import build

    report = build.verify_image(args.image, platform=args.platform, as_json=args.json)
    sys.stdout.write(report.output)
    if report.stderr:
        sys.stderr.write(report.stderr)
    extra = _not_in_sbom(args) if getattr(args, "sbom", None) else []
    return 0 if report.ok and not extra else 1


def _not_in_sbom(args: argparse.Namespace) -> list[str]:
    from pathlib import Path

    from megacpp_env.errors import RefusedError
    from megacpp_env.records import read_json
    from megacpp_env.sbom import image_distributions, unlisted

    if not Path(args.sbom).is_file():
        raise RefusedError(f"--sbom {args.sbom}: no such file (make it with: megacpp-env sbom TARGET --output FILE)")
    sbom = read_json(Path(args.sbom)).data
    extra = unlisted(sbom, image_distributions(args.image, platform=args.platform))
    for line in extra:
        print(f"verify-image: {args.image}: {line} is installed but not in the SBOM {args.sbom}", file=sys.stderr)
    return extra
