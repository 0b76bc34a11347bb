"""`megacpp-env show TARGET`: the resolved view of one target (toolchain, sources, env, base images)."""

from __future__ import annotations

import argparse
from typing import Any

from megacpp_env.commands._common import add_json, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="target name (see `megacpp-env targets`)")
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.ui import print_json

    view = load(args).target_view(args.target)
    if args.json:
        print_json(view)
    else:
        _print_view(view)
    return 0


def _print_view(view: dict[str, Any], indent: int = 0) -> None:
    pad = "  " * indent
    for key, value in view.items():
        if isinstance(value, dict):
            print(f"{pad}{key}:")
            _print_view(value, indent + 1)
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            print(f"{pad}{key}:")
            for item in value:
                print(f"{pad}  - {item.get('name', '')}")
                _print_view({k: v for k, v in item.items() if k != "name"}, indent + 2)
        elif isinstance(value, list):
            if not value:
                continue
            print(f"{pad}{key}:")
            for item in value:
                print(f"{pad}  - {item}")
        elif value not in ("", None):
            print(f"{pad}{key}: {value}")
