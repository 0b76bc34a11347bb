"""How often the high-entropy heuristic of ``megacpp_env.redact`` misses a random token, by
alphabet and length, and whether it takes any name of the identifier corpus for a token.

    python benchmarks/token_shapes.py [--seed N] [--per-cell N] [--json]

A token counts as caught when ``redact(value, tokens=True)`` removes it from ``run with <t> today``
(what the spec and the snapshot ask). Named token formats (``ghp_``, ``hf_``, ``AKIA`` ...) are
matched exactly and are not measured here. Touches no file.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from megacpp_env.redact import redact  # noqa: E402
from tests.fixtures.identifiers import IDENTIFIERS, KINDS, random_token  # noqa: E402

LENGTHS = (16, 20, 24, 32, 40, 48)


def caught(token: str) -> bool:
    return token not in redact(f"run with {token} today", tokens=True).text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--per-cell", type=int, default=20000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    missed = {
        kind: {n: sum(not caught(random_token(rng, kind, n)) for _ in range(args.per_cell)) for n in LENGTHS}
        for kind in KINDS
    }
    flagged = [name for name in IDENTIFIERS if redact(name, tokens=True).text != name]
    if args.json:
        print(json.dumps({"per_cell": args.per_cell, "missed": missed, "identifiers_flagged": flagged}, indent=2))
    else:
        print(f"missed of {args.per_cell} per cell (seed {args.seed})")
        print("kind".ljust(10) + "".join(f"{n:>9}" for n in LENGTHS))
        for kind, row in missed.items():
            print(kind.ljust(10) + "".join(f"{row[n]:>9}" for n in LENGTHS))
        print(f"identifiers taken for tokens: {len(flagged)} of {len(IDENTIFIERS)} {flagged}")
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
