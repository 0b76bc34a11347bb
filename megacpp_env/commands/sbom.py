"""`megacpp-env sbom TARGET [--platform P] [--output FILE]`: the CycloneDX SBOM of a target's image,
from the committed locks, the pinned sources (with overlay digests), artifacts and base image."""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="the target (see `megacpp-env targets`)")
    parser.add_argument("--platform", metavar="P", help="the platform (default: the target's first)")
    parser.add_argument("--output", metavar="FILE", help="write it here (atomically) instead of stdout")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from megacpp_env.errors import RefusedError
    from megacpp_env.fsutil import check_output_path, write_output
    from megacpp_env.sbom import image_sbom, render_sbom

    spec = load(args)
    target = spec.targets.get(args.target)
    if target is None:
        raise RefusedError(f"unknown target {args.target!r} (known: {', '.join(spec.targets)})")
    platform = args.platform or target.platforms[0]
    if platform not in target.platforms:
        raise RefusedError(f"--platform {platform}: {target.name} builds {', '.join(target.platforms)}")
    text = render_sbom(image_sbom(spec, target, platform))
    if args.output:
        write_output(check_output_path(Path(args.output), example="sbom.cdx.json"), text.encode())
    else:
        sys.stdout.write(text)
    return 0
