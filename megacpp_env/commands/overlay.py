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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.commands._common import add_json, load, load_optional

if TYPE_CHECKING:
    from megacpp_env.overlay import Manifest
    from megacpp_env.spec.model import Spec

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
    from megacpp_env import layout

    _check_name(args.name)
    spec = load_optional(args)
    if args.overlays is not None:
        overlay_dir = Path(args.overlays) / args.name
    else:
        spec = spec or load(args)  # no spec and no --overlays: the loader's own "no such file" error
        overlay_dir = layout.overlay_dir(spec.root, args.name)
    if args.action == "new":
        return _new(args, overlay_dir, spec)
    return _act(args, overlay_dir, spec)


def _check_name(name: str) -> None:
    from megacpp_env.errors import RefusedError
    from megacpp_env.spec.fields import SLUG_RE

    if not SLUG_RE.fullmatch(name):
        raise RefusedError(
            f"overlay name {name!r} is not valid: expected one directory name matching {SLUG_RE.pattern} "
            "(the rule of the spec's sources.*.overlay)"
        )


def _existing_dir(path: Path, flag: str) -> Path:
    from megacpp_env.errors import RefusedError

    if not path.exists():
        raise RefusedError(f"{flag} {path}: no such directory")
    if not path.is_dir():
        raise RefusedError(f"{flag} {path}: not a directory")
    return path


def _default_checkout(args: argparse.Namespace, m: Manifest, spec: Spec | None) -> Path:
    """``--to``, or the checkout ``megacpp-env checkout`` makes for the overlay's source."""
    from megacpp_env.checkout import default_dest
    from megacpp_env.errors import RefusedError

    if args.checkout is not None:
        return _existing_dir(args.checkout, "--to")
    source = spec.sources.get(m.source) if spec else None
    if spec is None or source is None:
        why = f"the spec has no source {m.source!r}" if spec else f"there is no spec at {args.spec}"
        raise RefusedError(f"pass --to CHECKOUT: {why} to find the default checkout of {m.source}")
    dest = default_dest(spec.root, source)
    if not dest.is_dir():
        raise RefusedError(
            f"{dest} (the default checkout of {m.source}) does not exist: make it with "
            f"`megacpp-env checkout {m.source}`, or pass --to CHECKOUT"
        )
    return dest


def _check_pin(m: Manifest, spec: Spec | None) -> None:
    from megacpp_env.errors import VerificationError

    source = spec.sources.get(m.source) if spec else None
    if source is not None and source.commit != m.commit:
        raise VerificationError(
            f"overlay {m.name} was captured at {m.commit}, but the spec pins {m.source} at {source.commit}: "
            f"re-capture it (`megacpp-env overlay new {m.name} --from CHECKOUT --force`)"
        )


def _act(args: argparse.Namespace, overlay_dir: Path, spec: Spec | None) -> int:
    from megacpp_env import overlay

    m = overlay.load_manifest(overlay_dir)
    checkout = _default_checkout(args, m, spec)
    if args.action in ("apply", "verify"):
        _check_pin(m, spec)
    if args.action == "apply":
        st = overlay.apply_overlay(overlay_dir, checkout)
    elif args.action == "verify":
        st = overlay.verify_overlay(overlay_dir, checkout)
    elif args.action == "restore":
        st = overlay.restore_overlay(overlay_dir, checkout, force=args.force)
    else:
        st = overlay.overlay_status(overlay_dir, checkout)
    consistent = st.state in ("applied", "clean") and not st.problems
    ok = {"restore": st.state == "clean", "status": consistent}.get(args.action, st.ok or (consistent and not st.files))
    _report(args, st.to_dict(), ok)
    return 0 if ok else 1


def _report(args: argparse.Namespace, data: dict[str, Any], ok: bool) -> None:
    from megacpp_env.ui import print_json

    if args.json:
        print_json({"action": args.action, **data, "ok": ok})
        return
    counts: dict[str, int] = {}
    for f in data["files"]:
        counts[f["state"]] = counts.get(f["state"], 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no files"
    print(f"overlay {data['name']} on {data['checkout']}: {data['state']} ({summary})")
    for f in data["files"]:
        if f["state"] != "applied" or not ok:
            print(f"  {f['state']:<9} {f['action']:<7} {f['path']}")
    for extra in (*data["problems"], *(f"stray temp file {p}" for p in data["stray_temp_files"])):
        print(f"  ! {extra}")


def _new(args: argparse.Namespace, overlay_dir: Path, spec: Spec | None) -> int:
    from megacpp_env import overlay
    from megacpp_env.errors import RefusedError
    from megacpp_env.ui import print_json

    checkout = _existing_dir(args.checkout, "--from")
    source = args.source or _source_naming(spec, args.name)
    if not source:
        raise RefusedError(f"no source of the spec names overlay {args.name!r}: pass --source SRC")
    head = _head_of(checkout, source)
    pinned = spec.sources[source].commit if spec and source in spec.sources else None
    if pinned and head != pinned:
        raise RefusedError(f"{checkout} is at {head}, but the spec pins {source} at {pinned}")
    m = overlay.new_overlay(overlay_dir, checkout, name=args.name, source=source, force=args.force)
    if args.json:
        print_json({"action": "new", "overlay_dir": str(overlay_dir), **m.to_dict()})
    else:
        print(f"captured {len(m.files)} file(s) of {source} at {m.commit} into {overlay_dir}")
        for f in m.files:
            print(f"  {f.action:<7} {f.path}")
    return 0


def _head_of(checkout: Path, source: str) -> str:
    from megacpp_env import git
    from megacpp_env.errors import RefusedError

    if not git.is_git_checkout(checkout):
        raise RefusedError(
            f"{checkout} is not a git checkout (no .git at its top): capture an overlay from a real checkout "
            f"(`megacpp-env checkout {source} --dest DIR`, then edit it)"
        )
    head = git.head_commit(checkout)
    if head is None:
        raise RefusedError(f"{checkout} is a git repository without a commit: nothing to compare its files with")
    return head


def _source_naming(spec: Spec | None, name: str) -> str:
    for src in spec.sources.values() if spec else ():
        if src.overlay == name:
            return src.name
    return ""
