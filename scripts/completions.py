"""Regenerate the shell completion scripts shipped in megacpp_env/completions/ with shtab (a dev
dependency), from the full argument parser (every verb's options). Run it after changing a verb's
arguments:  python scripts/completions.py    (tests/test_completion.py fails while they are stale)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from megacpp_env import completions
from megacpp_env.fsutil import atomic_write_bytes


def generate(shell: str) -> str:
    import shtab

    from megacpp_env.cli import build_parser

    return str(shtab.complete(build_parser([], every_verb=True), shell=shell))


def main() -> int:
    for shell in sorted(completions.FILES):
        changed = atomic_write_bytes(completions.path(shell), generate(shell).encode())
        print(f"{'wrote' if changed else 'unchanged'}: {completions.path(shell).name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
