"""``facts check``: every source's committed facts against the spec, offline (a missing or stale
facts file, a pin the facts were not read at). Exit 1 on an error."""

from __future__ import annotations

import argparse

from megacpp_env.commands._common import add_json, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.facts.check import check_facts
    from megacpp_env.ui import print_json

    found = check_facts(load(args))
    errors = [f for f in found if f.fails()]
    if args.json:
        facts = [{"source": f.key.removeprefix("sources."), "state": f.area, **f.to_dict()} for f in found]
        print_json({"ok": not errors, "facts": facts})
        return 1 if errors else 0
    for f in found:
        text = f"{f.area}: {f.key.removeprefix('sources.')}: {f.message}"
        print(f"{text} (remedy: {f.remedy})" if f.remedy and f.severity != "ok" else text)
    return 1 if errors else 0
