"""`megacpp-env overlay new|apply|verify|status|restore`: file overlays onto pinned checkouts.

  overlay new NAME --from CHECKOUT [--source SRC] [--force]   capture changed + untracked files
  overlay apply NAME [--to CHECKOUT]                          verify commit + base hashes, then all or none
  overlay verify NAME [--to CHECKOUT]                         exit 1 unless every file is applied
  overlay status NAME [--to CHECKOUT]                         applied/clean/partial/drifted/interrupted
  overlay restore NAME [--to CHECKOUT] [--force]              exact upstream bytes back

Overlays live in overlays/NAME/ beside the spec (--overlays DIR overrides); NAME is one directory
name (the rule of the spec's sources.*.overlay). --to defaults to the checkout `megacpp-env checkout`
makes for the overlay's source (.megacpp/src/<name-with-dashes> beside the spec). `apply` refuses a
checkout with local changes outside the overlay. Every action takes --json.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from megacpp_env.commands._common import add_json, load, load_optional

if TYPE_CHECKING:
    from megacpp_env.worktree.manifest import Manifest
    from megacpp_env.worktree.status import OverlayStatus

ACTIONS = {
    "new": "capture the changed and untracked files of a checkout into overlays/NAME",
    "apply": "lay overlays/NAME over a checkout (checks the commit and every base hash first)",
    "verify": "check that overlays/NAME is fully applied to a checkout",
    "status": "report where a checkout stands with respect to overlays/NAME",
    "restore": "put the exact upstream files back (also repairs an interrupted apply)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for action, help_text in ACTIONS.items():
        p = sub.add_parser(action, help=help_text, description=help_text)
        p.add_argument("name", metavar="NAME", help="the overlay (one directory name under overlays/)")
        if action == "new":
            p.add_argument("--from", dest="checkout", type=Path, required=True, metavar="CHECKOUT")
            p.add_argument("--source", default=None, help="the spec source it applies to (default: the one naming it)")
        else:
            p.add_argument(
                "--to", dest="checkout", type=Path, default=None, metavar="CHECKOUT",
                help="the checkout (default: the spec's checkout of the overlay's source, .megacpp/src/<name>)",
            )  # fmt: skip
        if action in ("new", "restore"):
            p.add_argument("--force", action="store_true", help="overwrite (new) / discard foreign edits (restore)")
        p.add_argument("--overlays", type=Path, default=None, metavar="DIR", help="overlays directory")
        p.add_argument("--spec", default=argparse.SUPPRESS, metavar="PATH", help="the stack spec")
        add_json(p)


def run(args: argparse.Namespace) -> int:
    from megacpp_env import overlay
    from megacpp_env.ui import print_json

    request = overlay.OverlayRequest(
        action=args.action, name=args.name, checkout=args.checkout,
        overlays=Path(args.overlays) if args.overlays is not None else None, source=getattr(args, "source", None),
        force=getattr(args, "force", False), spec_file=args.spec or "stack.yaml (here or in a parent directory)",
    )  # fmt: skip
    # without --overlays the overlays live beside the spec, so it must load; with it, it is optional
    done = overlay.perform(request, load_optional(args) if args.overlays is not None else load(args))
    if done.manifest is not None:
        _report_new(done.manifest, done.overlay_dir, args.json)
    elif done.status is not None and args.json:
        print_json({"action": args.action, **done.status.to_dict(), "ok": done.ok})
    elif done.status is not None:
        _report(done.status, done.ok)
    return 0 if done.ok else 1


def _report(st: OverlayStatus, ok: bool) -> None:
    counts = Counter(f.state for f in st.files)
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no files"
    print(f"overlay {st.name} on {st.checkout}: {st.state} ({summary})")
    for f in st.files:
        if f.state != "applied" or not ok:
            print(f"  {f.state:<9} {f.action:<7} {f.path}")
    for extra in (*st.problems, *(f"stray temp file {p}" for p in st.stray_temp_files)):
        print(f"  ! {extra}")


def _report_new(m: Manifest, overlay_dir: Path, as_json: bool) -> None:
    from megacpp_env.ui import print_json

    if as_json:
        print_json({"action": "new", "overlay_dir": str(overlay_dir), **m.to_dict()})
        return
    print(f"captured {len(m.files)} file(s) of {m.source} at {m.commit} into {overlay_dir}")
    for f in m.files:
        print(f"  {f.action:<7} {f.path}")
