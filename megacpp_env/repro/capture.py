"""The golden capture: what ``reproduce`` needs beyond the snapshot (see ``repro.document``).

Run once, when a golden is stored (``snapshot --golden``), on the machine the golden describes:
checkouts through ``capture_tree``; per distribution its origin, wheel tags, artifact hashes where
known (an exported lock, ``direct_url.json``, a build record), build record and portable RECORD
digest; the ``.pth`` files no distribution owns (``install: path`` checkouts and hand-made path
entries) with their paths written as tokens; how the venv was made (``pyvenv.cfg``).

A locally built wheel is tied to its checkout by its build record (``worktree.buildrecord``, left
by the source-build path in the venv's prefix), else inferred from a non-editable ``dir_info``
``direct_url.json`` naming a captured checkout (build env: the golden's recorded variables).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from megacpp_env.errors import MegacppEnvError
from megacpp_env.redact import credential_reason, line_secret_reason
from megacpp_env.repro import portable
from megacpp_env.repro.capture_tree import capture_checkout
from megacpp_env.repro.document import (
    Artifact,
    BuildInfo,
    Capture,
    CheckoutCapture,
    DistCapture,
    PathEntry,
    PythonCapture,
    is_creator_name,
    is_executable_pth_line,
)
from megacpp_env.repro.objects import ObjectStore
from megacpp_env.snapshot.document import Snapshot
from megacpp_env.worktree.buildrecord import BuildRecord, read_build_records

MAKER_FILES = {"uv": ("_virtualenv.pth", "_virtualenv.py"), "virtualenv": ("_virtualenv.pth", "_virtualenv.py")}
# Variables of the golden's environment that are not a build's input (inferred build envs).
NOT_BUILD_ENV = frozenset({"PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH"})


def capture_golden(
    snapshot: Snapshot, *, store: ObjectStore, golden: str, artifacts: Mapping[str, tuple[Artifact, ...]] | None = None,
    artifacts_from: str = "",
) -> Capture:  # fmt: skip
    """Everything the golden ``snapshot`` (just taken, on this machine) cannot re-create by itself."""
    checkouts = {
        k: capture_checkout(k, e, store) for k, e in snapshot.area("checkouts").items() if isinstance(e, Mapping)
    }
    problems = _name_clashes(checkouts)
    everywhere, python_roots = portable.roots_of(snapshot)
    interp = portable.interpreter(snapshot)
    prefix = Path(str(interp.get("prefix") or ""))
    maker, creator, system_site = venv_maker(prefix, interp)
    try:
        builds = read_build_records(prefix)
    except MegacppEnvError as exc:
        builds, problems = {}, [*problems, f"build records unreadable: {exc}"]
    by_path = {c.path: c for c in checkouts.values()}
    env = golden_build_env(snapshot)
    dists = {
        key: _dist(key, d, prefix, by_path, builds.get(key), env, python_roots, (artifacts or {}).get(key, ()))
        for key, d in (snapshot.area("python").get("distributions") or {}).items()
        if isinstance(d, Mapping)
    }
    entries, unowned = _path_entries(snapshot, everywhere, maker)
    return Capture(
        golden=golden,
        snapshot_digest=snapshot.digest,
        python=PythonCapture(
            version=str(interp.get("version", "")),
            implementation=str(interp.get("implementation", "CPython")),
            prefix=str(prefix),
            base_prefix=str(interp.get("base_prefix", "")),
            executable=str(interp.get("executable", "")),
            maker=maker,
            creator=creator,
            system_site_packages=system_site,
        ),
        distributions=dists,
        path_entries=entries,
        checkouts=checkouts,
        problems=(*problems, *unowned, *_build_problems(dists, by_path)),
        artifacts_from=artifacts_from,
    )


def _name_clashes(checkouts: Mapping[str, CheckoutCapture]) -> list[str]:
    seen: dict[str, str] = {}
    out = []
    for c in checkouts.values():
        if c.name in seen:
            out.append(f"checkouts {seen[c.name]} and {c.path} share the directory name {c.name!r}: reproduce puts "
                       "each at --checkouts DIR/<name>; rename one")  # fmt: skip
        seen[c.name] = c.path
    return out


def venv_maker(prefix: Path, interp: Mapping[str, Any]) -> tuple[str, str, bool]:
    """What made the environment at ``prefix`` (from its ``pyvenv.cfg``), the name its interpreter
    was run by (``command = .../python3 -m venv ...``), and whether it sees the base site-packages."""
    if interp.get("prefix") == interp.get("base_prefix"):
        return "none", "", False
    try:
        lines = (prefix / "pyvenv.cfg").read_text(encoding="utf-8").splitlines()
    except OSError:
        return "venv", "", False
    cfg = {k.strip().lower(): v.strip() for k, _, v in (ln.partition("=") for ln in lines) if k.strip()}
    maker = "uv" if "uv" in cfg else "virtualenv" if "virtualenv" in cfg else "venv"
    creator = _shebang_name(prefix) or Path(cfg.get("command", "").split(" ", 1)[0]).name
    creator = creator if is_creator_name(creator) else ""
    return maker, creator, cfg.get("include-system-site-packages", "false").lower() == "true"


def _shebang_name(prefix: Path) -> str:
    """The interpreter name ensurepip wrote into ``bin/pip`` (``python3.11``): the name the venv
    was made with."""
    try:
        with open(prefix / "bin" / "pip", "rb") as fh:
            first = fh.readline(4096).decode("utf-8", "replace").strip()
    except OSError:
        return ""
    head = f"#!{prefix}/bin/"
    return first[len(head) :] if first.startswith(head) and "/" not in first[len(head) :] else ""


def golden_build_env(snapshot: Snapshot) -> dict[str, str]:
    variables = snapshot.area("env").get("variables") or {}
    return {
        k: v
        for k, v in sorted(variables.items())
        if isinstance(v, str) and k not in NOT_BUILD_ENV and "<redacted>" not in v
    }


def wheel_tags(dist_info: Path) -> tuple[str, ...]:
    """The ``Tag:`` lines of a distribution's ``WHEEL`` file (the wheel it was installed from)."""
    try:
        text = (dist_info / "WHEEL").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ()
    return tuple(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:"))


def _under(path: str, root: Path) -> bool:
    return bool(str(root)) and (path == str(root) or path.startswith(str(root).rstrip("/") + "/"))


def _file_path(url: str) -> str:
    from urllib.parse import unquote, urlsplit

    return unquote(urlsplit(url).path) if url.startswith("file:") else ""


def origin_of(d: Mapping[str, Any], prefix: Path) -> str:
    url = d.get("direct_url") or {}
    if not _under(str(d.get("location", "")), prefix) and prefix != Path():
        return "outside"
    if not url:
        return "index"
    if "vcs_info" in url:
        return "vcs"
    if "dir_info" in url:
        return "editable" if (url.get("dir_info") or {}).get("editable") else "local-build"
    return "url"


def _dist(
    key: str, d: Mapping[str, Any], prefix: Path, by_path: Mapping[str, CheckoutCapture], record: BuildRecord | None,
    env: Mapping[str, str], roots: portable.Roots, artifacts: tuple[Artifact, ...],
) -> DistCapture:  # fmt: skip
    dist_info = Path(str(d.get("location", ""))) / str(d.get("metadata_dir", ""))
    origin = "local-build" if record is not None else origin_of(d, prefix)
    build = _build_info(d, record, by_path, env) if origin == "local-build" else None
    return DistCapture(
        key=key, name=str(d.get("name", key)), version=str(d.get("version", "")),
        installer=str(d.get("installer", "")), requested=bool(d.get("requested")), origin=origin,
        tags=wheel_tags(dist_info), artifacts=artifacts or _known_artifacts(d, record),
        direct_url=portable.direct_url_form(d.get("direct_url"), roots) if d.get("direct_url") else None,
        portable_record=portable.record_digest(dist_info, roots) if dist_info.name.endswith(".dist-info") else "",
        build=build,
    )  # fmt: skip


def _build_info(
    d: Mapping[str, Any], record: BuildRecord | None, by_path: Mapping[str, CheckoutCapture], env: Mapping[str, str]
) -> BuildInfo:
    if record is not None:
        found = by_path.get(record.checkout)
        return BuildInfo(checkout=found.name if found else "", build_env=dict(record.build_env), source="record")
    where = _file_path(str((d.get("direct_url") or {}).get("url", "")))
    found = by_path.get(where)
    return BuildInfo(checkout=found.name if found else "", build_env=dict(env), source="direct_url")


def _known_artifacts(d: Mapping[str, Any], record: BuildRecord | None) -> tuple[Artifact, ...]:
    if record is not None and record.wheel and record.wheel_sha256:
        return (Artifact(filename=record.wheel, sha256=record.wheel_sha256),)
    url = d.get("direct_url") or {}
    info = url.get("archive_info") or {}
    sha = (info.get("hashes") or {}).get("sha256") or str(info.get("hash", "")).removeprefix("sha256=")
    name = str(url.get("url", "")).rsplit("/", 1)[-1]
    if sha and len(sha) == 64 and name.endswith(".whl"):
        return (Artifact(filename=name, sha256=sha, url=str(url.get("url", ""))),)
    return ()


def _build_problems(dists: Mapping[str, DistCapture], by_path: Mapping[str, CheckoutCapture]) -> list[str]:
    return [
        f"{d.name} {d.version} was built locally but its checkout was not inspected (pass it with --paths "
        "when storing the golden): reproduce cannot rebuild it"
        for d in dists.values()
        if d.build is not None and not d.build.checkout
    ]


def _path_entries(snapshot: Snapshot, roots: portable.Roots, maker: str) -> tuple[tuple[PathEntry, ...], list[str]]:
    """The unowned ``.pth`` files of the venv's site directories, relocated; other unowned entries
    are problems (nothing says how to make them again)."""
    entries: list[PathEntry] = []
    problems: list[str] = []
    unowned = snapshot.area("python").get("unowned_site_files") or {}
    for site, names in sorted(unowned.items()):
        token_site = roots.text(site)
        if not token_site.startswith(portable.VENV):
            continue
        for name in names:
            if name in MAKER_FILES.get(maker, ()):
                continue
            if not name.endswith(".pth"):
                problems.append(f"{site}/{name} belongs to no distribution: reproduce cannot make it (install it "
                                "as a distribution, or remove it and store the golden again)")  # fmt: skip
                continue
            try:
                lines = (Path(site) / name).read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError as exc:
                problems.append(f"{site}/{name}: unreadable: {exc.strerror or exc}")
                continue
            why = _pth_refusal(lines)
            if why:
                problems.append(f"{site}/{name}: {why}: not stored, reproduce cannot make it")
                continue
            entries.append(PathEntry(site=token_site, file=name, lines=tuple(roots.text(ln) for ln in lines)))
    return tuple(entries), problems


def _pth_refusal(lines: list[str]) -> str:
    """Why a ``.pth`` file's lines may not be stored: a credential in one, or a line that runs code."""
    for n, line in enumerate(lines, 1):
        if is_executable_pth_line(line):
            return f"line {n} runs code at every interpreter start (import ...)"
        why = line_secret_reason(line) or credential_reason(line)
        if why:
            return f"line {n} holds a credential ({why})"
    return ""


def store_capture(
    snapshot: Snapshot, golden_file: Path, name: str, *, artifacts: Mapping[str, tuple[Artifact, ...]] | None = None,
    artifacts_from: str = "",
) -> tuple[Path, Capture]:  # fmt: skip
    """Capture ``snapshot`` (just stored as golden ``name`` at ``golden_file``) beside it."""
    from megacpp_env.repro.document import capture_path, write_capture

    store = ObjectStore.beside(golden_file.parent)
    found = capture_golden(snapshot, store=store, golden=name, artifacts=artifacts, artifacts_from=artifacts_from)
    path = capture_path(golden_file)
    write_capture(found, path)
    return path, found
