"""Start-up cost of the CLI: `megacpp-env --help` must start in under 100 ms.

Run: python benchmarks/bench_cli.py [--repeat N]
Prints one line per command and a JSON summary on the last line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import fmt, time_command

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    exe = shutil.which("megacpp-env")
    commands = {
        "python -c pass (interpreter floor)": [sys.executable, "-c", "pass"],
        "python -m megacpp_env --help": [sys.executable, "-m", "megacpp_env", "--help"],
        "python -m megacpp_env check": [sys.executable, "-m", "megacpp_env", "check"],
    }
    if exe:
        commands["megacpp-env --help (console script)"] = [exe, "--help"]
    results = {}
    for label, argv in commands.items():
        results[label] = time_command(argv, repeat=args.repeat, cwd=str(ROOT))
        print(f"{label:<40} {fmt(results[label])}")
    print(json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
