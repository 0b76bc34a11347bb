"""``gate --base GITREF``: compare the committed locks at GITREF with the working tree, classify every
change and fail on policy violations that no reviewed acknowledgement covers."""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import add_epilog, add_json, spec_path, workspace

EPILOG = """\
policy: these fail unless acknowledged in the ack file (default locks/ACKNOWLEDGED.toml):
  hashes-changed (same version, new hashes), index-changed, downgraded, any change of a toolchain
  package (torch, triton, pytorch-triton, nvidia-*, cuda-*) in an existing lock, and divergence
  between locks that must agree (platforms of a target; spec `aligned` groups).
  A lock new since GITREF is shown; only the divergence rule applies to it.

ack file entries: [[ack]] package = "torch", change = "upgraded", reason = "...",
  optional target / platform / version.

--format markdown is the pull-request comment: every value from a lock, the spec or the ack file
  is escaped, the summary comes first, details are collapsed, and it stays under 50,000 bytes. When
  the gate cannot run (an unknown ref, a malformed lock), the comment says why (and the error goes
  to stderr). --check-results DIR adds the checks the lock-gate action ran (NAME.rc, NAME.log).
  Credentials in URLs (user:password@) are removed from every format.

exit codes: 0 pass (no violations, or all acknowledged); 1 unacknowledged violations, an unknown
  ref, a malformed ack file or an --ack FILE that does not exist; 2 usage.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_epilog(parser, EPILOG)
    parser.add_argument("--base", required=True, metavar="GITREF", help="the ref to compare against (origin/main)")
    parser.add_argument(
        "--format", choices=("text", "markdown", "json", "github", "sarif"), default="text",
        help="markdown: the pull-request comment; github: workflow annotations (file, line); sarif: SARIF 2.1.0",
    )  # fmt: skip
    add_json(parser)
    parser.add_argument("--ack", metavar="FILE", help="acknowledgement file (default: locks/ACKNOWLEDGED.toml)")
    parser.add_argument(
        "--check-results", metavar="DIR",
        help="include the results of checks run before the gate: DIR/NAME.rc (exit status), DIR/NAME.log",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from megacpp_env.lock.report import gate_shown

    fmt = "json" if args.json else args.format
    ack = Path(args.ack) if args.ack else None
    results = Path(args.check_results) if args.check_results else None
    shown = gate_shown(spec_path(args), args.base, ack, fmt, results, workspace())
    sys.stdout.write(shown.text)
    if shown.error is not None:
        raise shown.error
    return shown.exit_code
