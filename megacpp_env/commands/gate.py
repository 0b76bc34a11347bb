"""``gate --base GITREF``: compare the committed locks at GITREF with the working tree, classify every
change and fail on policy violations that no reviewed acknowledgement covers."""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import add_json, load

EPILOG = """\
policy: these fail unless acknowledged in the ack file (default locks/ACKNOWLEDGED.toml):
  hashes-changed (same version, new hashes), index-changed, downgraded, any change of a toolchain
  package (torch, triton, pytorch-triton, nvidia-*, cuda-*) in an existing lock, and divergence
  between locks that must agree (platforms of a target; spec `aligned` groups).
  A lock new since GITREF is shown; only the divergence rule applies to it.

ack file entries: [[ack]] package = "torch", change = "upgraded", reason = "...",
  optional target / platform / version.

exit codes: 0 pass (no violations, or all acknowledged); 1 unacknowledged violations, an unknown
  ref, a malformed ack file or an --ack FILE that does not exist; 2 usage.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--base", required=True, metavar="GITREF", help="the ref to compare against (origin/main)")
    parser.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    add_json(parser)
    parser.add_argument("--ack", metavar="FILE", help="acknowledgement file (default: locks/ACKNOWLEDGED.toml)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from megacpp_env.lock.report import gate_text

    report, text = gate_text(
        load(args), args.base, Path(args.ack) if args.ack else None, "json" if args.json else args.format
    )
    sys.stdout.write(text)
    return 0 if report.verdict.passed else 1
