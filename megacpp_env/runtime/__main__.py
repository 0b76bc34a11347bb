"""``python -m megacpp_env.runtime install [--uninstall] [--dir DIR] [--json]`` and ``... status``.

``install`` writes ``megacpp_env_runtime.pth`` into the running interpreter's purelib (run it with
the venv's python); ``--uninstall`` removes it. ``status`` prints each patch's gate and state.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from megacpp_env.runtime import hook_path, pth, status


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m megacpp_env.runtime", description=__doc__)
    sub = p.add_subparsers(dest="action", required=True)
    inst = sub.add_parser("install", help="write (or --uninstall) the .pth hook")
    inst.add_argument("--uninstall", action="store_true", help="remove the .pth hook")
    inst.add_argument("--dir", type=Path, default=None, help="site directory (default: this interpreter's purelib)")
    inst.add_argument("--json", action="store_true")
    st = sub.add_parser("status", help="gates and states of the runtime patches in this interpreter")
    st.add_argument("--json", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.action == "status":
        report = {"pth": hook_path(), "patches": status()}
        print(json.dumps(report, indent=2, sort_keys=True))
        return 0
    path, changed = pth.uninstall(args.dir) if args.uninstall else pth.install(args.dir)
    verb = "removed" if args.uninstall else "installed"
    if args.json:
        print(json.dumps({"action": verb, "path": str(path), "changed": changed}, sort_keys=True))
    else:
        print(f"{verb if changed else 'unchanged'}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
