"""Regenerate the shell completion scripts shipped in megacpp_env/completions/ with shtab (a dev
dependency), from the full argument parser (every verb's options). Run it after changing a verb's
arguments:  python scripts/completions.py    (tests/test_completion.py fails while they are stale)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from megacpp_env import completions
from megacpp_env.fsutil import atomic_write_bytes


def generate(shell: str) -> str:
    import shtab

    from megacpp_env.cli import build_parser

    parser = build_parser([], every_verb=True)
    for verb, sub in _verbs(parser):
        for action in sub._actions:
            kind = completions.name_kind(verb, action.dest, action.metavar)
            if kind and not action.option_strings:
                action.complete = shtab.cmd(completions.names_command(kind))  # type: ignore[attr-defined]
    return str(shtab.complete(parser, shell=shell))


def _verbs(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, argparse.ArgumentParser]]:
    """(verb, its parser) for every verb and sub-verb (``lock diff``)."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                verb = f"{prefix} {name}".strip()
                out += [(verb, sub), *_verbs(sub, verb)]
    return out


def main() -> int:
    for shell in sorted(completions.FILES):
        changed = atomic_write_bytes(completions.path(shell), generate(shell).encode())
        print(f"{'wrote' if changed else 'unchanged'}: {completions.path(shell).name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
