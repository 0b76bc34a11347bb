"""``verify-image``: what a built image has baked in, checked inside the image. Never prints."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megacpp_env import docker, layout
from megacpp_env.errors import ToolError, one_line
from megacpp_env.records import json_object
from megacpp_env.sbom import check_image


def read_baked_snapshot(image: str, platform: str = "") -> dict[str, Any]:
    """The snapshot baked into ``image`` (a JSON object: what the image says is untrusted, so anything
    else, or JSON nested too deeply, is a ToolError)."""
    proc = docker.run_in_image(image, ["cat", layout.IMAGE_SNAPSHOT], platform=platform, entrypoint="")
    if proc.returncode != 0:
        raise ToolError(f"{image}: cannot read {layout.IMAGE_SNAPSHOT}: {one_line(proc.stderr.strip()[-300:])}")
    return json_object(proc.stdout, f"{image}: {layout.IMAGE_SNAPSHOT}", ToolError)


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifyReport:
    ok: bool
    output: str
    stderr: str = ""


SNAPSHOT_FAILED = 86  # the exit status verify-image's in-image script gives a failed snapshot (diff uses 0-3)


def verify_image(image: str, *, platform: str = "", as_json: bool = False) -> VerifyReport:
    """Take a snapshot inside ``image`` and diff it against the one baked at build time (in the image,
    with the image's own megacpp-env, so both sides come from the same tool version).

    A snapshot that fails is a ``ToolError``; only a diff that finds differences is drift."""
    diff = "megacpp-env diff --json" if as_json else "megacpp-env diff"
    script = (
        'live="$(mktemp)"; err="$(mktemp)"; '
        'if ! megacpp-env snapshot -o "$live" >/dev/null 2>"$err"; then '
        f'tail -n 20 "$err" >&2; exit {SNAPSHOT_FAILED}; fi; '
        f'exec {diff} {layout.IMAGE_SNAPSHOT} "$live"'
    )
    proc = docker.run_in_image(image, ["bash", "-c", script], platform=platform)
    if proc.returncode == SNAPSHOT_FAILED:
        raise ToolError(f"snapshot inside the image failed: {_last_lines(proc.stderr)}")
    if proc.returncode not in (0, 1):
        detail = one_line((proc.stderr or proc.stdout).strip()[-500:])
        raise ToolError(f"verify-image {image}: exit {proc.returncode}: {detail}")
    return VerifyReport(ok=proc.returncode == 0, output=_printable(proc.stdout), stderr=_printable(proc.stderr))


def verify(image: str, *, platform: str = "", as_json: bool = False, sbom_file: str = "") -> VerifyReport:
    """``verify-image``: the snapshot diff, then the image against its SBOM (the baked one, or ``sbom_file``);
    with ``as_json``, the diff's document with the SBOM check under ``sbom``."""
    report = verify_image(image, platform=platform, as_json=as_json)
    checked = check_image(image, platform=platform, sbom_file=Path(sbom_file) if sbom_file else None)
    ok = report.ok and checked.ok
    if not as_json:
        out, err = (
            (report.output + checked.summary(), report.stderr)
            if checked.ok
            else (report.output, report.stderr + checked.summary())
        )
        return VerifyReport(ok=ok, output=out, stderr=err)
    diffed = json_object(report.output, f"verify-image {image}: the diff inside the image", ToolError)
    doc = {**diffed, "ok": ok, "sbom": checked.to_dict()}
    return VerifyReport(ok=ok, output=json.dumps(doc, indent=2, sort_keys=True) + "\n", stderr=report.stderr)


def _printable(text: str) -> str:
    """What the image printed, each line with its control and invisible characters escaped (the image
    is untrusted and this reaches a terminal)."""
    return "".join(one_line(line) + "\n" for line in text.splitlines())


def _last_lines(text: str, count: int = 5) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return one_line(" | ".join(lines[-count:])) or "(no output)"
