"""Pin a target's base images by digest, and check the pins (``megacpp-env pin-base``). Never prints.

* ``entries`` lists the spec keys that hold a target's base images: ``targets.T.base_image`` when one
  reference serves every platform, ``targets.T.base_image.<platform>`` for the per-platform form.
* ``pin`` asks the registry which digest each tag names now (``registry.Client.resolve``) and checks
  that the digest serves every platform the key is used for (an index's entries, or a single
  manifest's config).
* ``check`` compares pinned references with what their tags name now: a tag that moved is drift.
* ``refuse_if_base_moved``: before a build, a pinned base whose tag now names another digest is
  refused as drift (``--skip-base-check`` builds from the pinned digest anyway).
* ``write_pins`` edits stack.yaml as text: only the image reference on the line the spec loader
  recorded for the key changes, so comments, quoting and layout stay. The edited text is re-loaded
  and must equal the old spec with just those references changed before it is written atomically.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megacpp_env import registry
from megacpp_env.errors import RefusedError, SpecError, VerificationError
from megacpp_env.fsutil import atomic_write_text
from megacpp_env.spec.model import ImageRef, Spec, Target

PINNED, REPINNED, UNCHANGED = "pinned", "repinned", "unchanged"  # pin-base
OK, MOVED, UNPINNED = "ok", "moved", "unpinned"  # pin-base --check
SKIP_FLAG = "--skip-base-check"


@dataclass(frozen=True, kw_only=True, slots=True)
class BaseEntry:
    """One spec key holding a base image, and the platforms it is the base of."""

    target: str
    key: str
    line: int
    platforms: tuple[str, ...]
    image: ImageRef

    @property
    def token(self) -> str:
        """The YAML key written on the line: ``base_image`` or the platform."""
        return self.platforms[0] if self.key.endswith(f".{self.platforms[0]}") else "base_image"

    def where(self, spec: Spec) -> str:
        return f"{spec.path}:{self.line}: {self.key}" if self.line else f"{spec.path}: {self.key}"


@dataclass(frozen=True, kw_only=True, slots=True)
class PinResult:
    entry: BaseEntry
    status: str
    digest: str = ""  # what the tag names now ("" when not asked)
    media_type: str = ""
    served: tuple[str, ...] = ()  # platforms the digest serves
    new_ref: str = ""  # the reference written (pin) or expected (check)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.entry.target,
            "key": self.entry.key,
            "line": self.entry.line,
            "platforms": list(self.entry.platforms),
            "ref": str(self.entry.image),
            "status": self.status,
            "digest": self.digest,
            "media_type": self.media_type,
            "served": list(self.served),
            "new_ref": self.new_ref,
        }


def entries(spec: Spec, target: Target, platforms: tuple[str, ...] = ()) -> tuple[BaseEntry, ...]:
    """The keys holding ``target``'s base images, limited to those used for ``platforms`` (default: all)."""
    shared = f"targets.{target.name}.base_image"
    out: list[BaseEntry] = []
    common = [p for p in target.platforms if f"{shared}.{p}" not in spec.lines]
    if common:
        image = target.base_image(common[0])
        out.append(_entry(spec, target, shared, tuple(common), image))
    for p in target.platforms:
        if p not in common:
            out.append(_entry(spec, target, f"{shared}.{p}", (p,), target.base_image(p)))
    wanted = platforms or target.platforms
    return tuple(e for e in out if set(e.platforms) & set(wanted))


def _entry(spec: Spec, target: Target, key: str, platforms: tuple[str, ...], image: ImageRef) -> BaseEntry:
    return BaseEntry(target=target.name, key=key, line=spec.lines.get(key, 0), platforms=platforms, image=image)


def _tag_ref(entry: BaseEntry) -> registry.Reference:
    """The reference to ask the registry about: the tag when there is one (a pin is checked against it)."""
    image = entry.image
    return registry.Reference.parse(f"{image.name}:{image.tag}" if image.tag else str(image))


# ---- resolving -----------------------------------------------------------------------------------


def resolve(spec: Spec, entry: BaseEntry, client: registry.Client) -> PinResult:
    """What the entry's tag names now, checked to serve every platform the entry is the base of."""
    ref = _tag_ref(entry)
    try:
        desc = client.resolve(ref)
        served = client.platforms(ref, desc.digest)
    except registry.RegistryError as exc:
        raise registry.RegistryError(f"{entry.where(spec)}: {exc}{_local_hint(entry)}") from None
    names = tuple(s.platform for s in served)
    for platform in entry.platforms:
        if not any(s.matches(platform) for s in served):
            raise VerificationError(
                f"{entry.where(spec)}: {ref} ({desc.digest}) serves {', '.join(names) or 'no platform'}, "
                f"not {platform} (remedy: name an image built for {platform})"
            )
    return PinResult(entry=entry, status="", digest=desc.digest, media_type=desc.media_type, served=names)


def _local_hint(entry: BaseEntry) -> str:
    if registry.Reference.parse(str(entry.image)).registry != registry.DOCKER_HUB:
        return ""
    return (
        f" (if {entry.image} is a local image, it has no registry digest: push it to a registry, e.g. the "
        "loopback one of scripts/registry-up.sh, and name it HOST:PORT/... in the spec)"
    )


def pin(spec: Spec, target: Target, platforms: tuple[str, ...], client: registry.Client) -> list[PinResult]:
    """The pinned reference of every base image of ``target`` (nothing is written)."""
    out = []
    for entry in entries(spec, target, platforms):
        res = resolve(spec, entry, client)
        new = pinned_image(res)  # a digest-only reference stays as it is: it has no tag that could move
        status = UNCHANGED if new == entry.image else (REPINNED if entry.image.digest else PINNED)
        out.append(dataclasses.replace(res, status=status, new_ref=str(new)))
    return out


def check(spec: Spec, target: Target, platforms: tuple[str, ...], client: registry.Client) -> list[PinResult]:
    """Each base image's state: ``unpinned`` (no digest; not asked), ``ok`` or ``moved`` (tag drifted)."""
    out = []
    for entry in entries(spec, target, platforms):
        if not entry.image.digest:
            out.append(PinResult(entry=entry, status=UNPINNED))
            continue
        res = resolve(spec, entry, client)
        status = OK if res.digest == entry.image.digest else MOVED
        out.append(dataclasses.replace(res, status=status, new_ref=str(entry.image)))
    return out


def moved_message(spec: Spec, result: PinResult) -> str:
    e = result.entry
    return (
        f"{e.where(spec)}: the tag {e.image.name}:{e.image.tag} now names {result.digest}, not the pinned "
        f"{e.image.digest}: the base image changed under its tag (remedy: inspect the new image; if it is "
        f"wanted, `megacpp-env pin-base {e.target}` moves the pin and re-renders; if not, push the pinned "
        "image back to the tag)"
    )


def unpinned_message(spec: Spec, result: PinResult) -> str:
    e = result.entry
    return f"{e.where(spec)}: {e.image} has no @sha256 digest (remedy: `megacpp-env pin-base {e.target}`)"


def refuse_if_base_moved(spec: Spec, target: Target, platform: str) -> None:
    """Refuse a build whose pinned base image's tag now names another digest, or cannot be asked."""
    pinned = [e for e in entries(spec, target, (platform,)) if e.image.digest and e.image.tag]
    if not pinned:
        return
    try:
        results = check(spec, target, (platform,), registry.Client())
    except registry.RegistryError as exc:
        raise RefusedError(
            f"refusing to build: cannot check that the pinned base image's tag still names its digest: {exc} "
            f"(remedy: {SKIP_FLAG} builds from the pinned digest without asking the registry)"
        ) from None
    moved = [moved_message(spec, r) for r in results if r.status == MOVED]
    if moved:
        raise VerificationError(
            "refusing to build: " + "; ".join(moved) + f"; {SKIP_FLAG} builds from the pinned digest anyway"
        )


# ---- the verb ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class PinOutcome:
    """What ``pin-base`` did: each base's result; with ``check``, nothing was written or rendered."""

    spec: Spec
    results: tuple[PinResult, ...]
    check: bool = False
    written: bool = False
    rendered: tuple[str, ...] = ()

    @property
    def bad(self) -> tuple[PinResult, ...]:
        """``check``: the bases that are unpinned or whose tag moved."""
        return tuple(r for r in self.results if r.status != OK) if self.check else ()

    def check_lines(self) -> list[str]:
        """``--check``'s report: one line per base image (drift, unpinned or ok)."""
        out = []
        for r in self.results:
            if r.status == MOVED:
                out.append(f"drift: {moved_message(self.spec, r)}")
            elif r.status == UNPINNED:
                out.append(f"unpinned: {unpinned_message(self.spec, r)}")
            else:
                out.append(f"{r.entry.where(self.spec)}: ok: {r.entry.image} (the tag still names the pinned digest)")
        return out


def pin_and_render(
    spec: Spec, name: str, platforms: tuple[str, ...] = (), *, check_only: bool = False,
    client: registry.Client | None = None,
) -> PinOutcome:  # fmt: skip
    """``pin-base``: resolve the target once; with ``check_only`` only check its pins. Otherwise pin its
    base images, write them into the spec, reload it and re-render the target when something changed."""
    from megacpp_env import render
    from megacpp_env.spec import load_spec

    target = spec.target(name)
    chosen = tuple(target.pick_platform(p) for p in platforms)
    client = client or registry.Client()
    if check_only:
        return PinOutcome(spec=spec, results=tuple(check(spec, target, chosen, client)), check=True)
    results = pin(spec, target, chosen, client)
    if not write_pins(spec, results):
        return PinOutcome(spec=spec, results=tuple(results))
    new_spec = load_spec(spec.path)
    rendered = render.write(new_spec.root, render.render_target(new_spec, new_spec.target(name)))
    return PinOutcome(spec=spec, results=tuple(results), written=True, rendered=tuple(rendered))


# ---- writing -------------------------------------------------------------------------------------


def write_pins(spec: Spec, results: list[PinResult]) -> bool:
    """Write the new references into the spec file (atomically); False when nothing changed."""
    changes = [r for r in results if r.status in (PINNED, REPINNED)]
    if not changes:
        return False
    text = spec.path.read_text(encoding="utf-8")
    for r in changes:
        text = edit_line(text, spec, r.entry, str(r.entry.image), str(pinned_image(r)))
    _validate(spec, text, changes)
    # through a symlinked stack.yaml to the file it names: the link stays, and the real spec is pinned
    return atomic_write_text(Path(os.path.realpath(spec.path)), text)


def pinned_image(result: PinResult) -> ImageRef:
    image = result.entry.image
    return ImageRef(name=image.name, tag=image.tag, digest=result.digest) if image.tag else image


def edit_line(text: str, spec: Spec, entry: BaseEntry, old: str, new: str) -> str:
    """Replace the scalar ``old`` after ``<token>:`` on the entry's line with ``new``; nothing else."""
    lines = text.splitlines(keepends=True)
    if not 1 <= entry.line <= len(lines):
        raise SpecError("no recorded line for this key", file=str(spec.path), key=entry.key)
    body = lines[entry.line - 1].rstrip("\r\n")
    ending = lines[entry.line - 1][len(body) :]
    matches = list(_value_pattern(entry.token, old).finditer(body))
    if len(matches) != 1:
        raise SpecError(
            f"cannot find `{entry.token}: {old}` on this line to edit ({len(matches)} matches)",
            file=str(spec.path),
            line=entry.line,
            key=entry.key,
            remedy=f"write {new} there by hand",
        )
    m = matches[0]
    lines[entry.line - 1] = body[: m.start("value")] + new + body[m.end("value") :] + ending
    return "".join(lines)


def _value_pattern(token: str, value: str) -> re.Pattern[str]:
    return re.compile(
        rf"(?<![\w./-])(?P<kq>[\"']?){re.escape(token)}(?P=kq)[ \t]*:[ \t]+"
        rf"(?P<q>[\"']?)(?P<value>{re.escape(value)})(?P=q)(?=[ \t]*(?:#.*|,.*|\}}.*)?$)"
    )


def _validate(spec: Spec, text: str, changes: list[PinResult]) -> None:
    """The edited text must load, and equal the old spec with just the changed references replaced."""
    from megacpp_env.spec import load_spec_text

    new_spec = load_spec_text(text, spec.path)
    targets = dict(spec.targets)
    for r in changes:
        t = targets[r.entry.target]
        bases = {**t.base_images, **dict.fromkeys(r.entry.platforms, pinned_image(r))}
        targets[t.name] = dataclasses.replace(t, base_images=bases)
    if dataclasses.replace(spec, targets=targets) != new_spec:
        raise SpecError(
            "the edited spec differs from the intended one beyond the pinned references; nothing written",
            file=str(spec.path),
            remedy="pin by hand and report this as a bug",
        )
