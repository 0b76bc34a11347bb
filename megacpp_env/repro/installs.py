"""Install the golden's distributions into the re-created venv, each the way it came:

index       by exact version (hashes where known), by the golden's installer (``pyenv``)
vcs         ``name @ vcs+url@commit``
url         ``name @ url`` (a ``file:`` wheel from its path or the mirror, hash checked)
editable    ``-e`` the re-created checkout
local-build rebuilt from the re-created checkout with its build env (``rebuild``), never downloaded

Then the set is made equal to the golden's: what the golden did not have is uninstalled, what the
pip resolution did not bring is installed on its own. Never prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from megacpp_env.errors import MegacppEnvError
from megacpp_env.fsutil import sha256_file
from megacpp_env.repro import pyenv, rebuild
from megacpp_env.repro.document import Capture, DistCapture
from megacpp_env.repro.outcome import Unrecreated
from megacpp_env.repro.portable import Roots
from megacpp_env.snapshot.collectors.python_env import dist_key
from megacpp_env.snapshot.probe import run_probe

Say = Callable[[str], None]


@dataclass(kw_only=True, slots=True)
class Installs:
    """What was installed (distribution -> how), what was not, notes."""

    done: dict[str, str] = field(default_factory=dict)
    failed: list[Unrecreated] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    python: Path  # the re-created venv's interpreter
    prefix: Path
    roots: Roots  # this place's roots: tokens -> the re-created paths
    checkouts: Mapping[str, Path]  # name -> re-created (and proved) checkout
    mirror: Path | None
    work: Path  # scratch directory


def install_all(cap: Capture, target: Target, say: Say) -> Installs:
    out = Installs()
    dists = sorted(cap.distributions.values(), key=lambda d: d.key)
    index = [d for d in dists if d.origin == "index"]
    _index(index, target, out, say)
    for d in dists:
        if d.origin in ("vcs", "url", "editable", "local-build"):
            say(f"{d.origin}: {d.name} {d.version}")
            _direct(d, target, out)
    _reconcile(cap, target, out, say)
    return out


def _index(index: Sequence[DistCapture], target: Target, out: Installs, say: Say) -> None:
    by_installer = {i: [d for d in index if d.installer == i] for i in pyenv.INSTALLERS}
    for d in index:
        if d.installer not in pyenv.INSTALLERS:
            out.failed.append(Unrecreated(
                what=f"{d.name} {d.version}", why=f"the golden installed it with {d.installer or 'an unknown tool'}",
                remedy="install it into the venv with that tool (reproduce uses pip and uv only)",
            ))  # fmt: skip
    say(f"installing {len(by_installer['uv'])} distribution(s) with uv")
    failed = pyenv.install_uv(target.python, by_installer["uv"], target.mirror, target.work)
    say(f"installing {len(by_installer['pip'])} distribution(s) with pip")
    more, notes = pyenv.install_pip(target.python, by_installer["pip"], index, target.mirror, target.work)
    out.failed += failed + more
    out.notes += notes
    gone = {f.what for f in out.failed}
    how = "mirror" if target.mirror else "index"
    out.done.update({d.key: how for d in index if f"{d.name} {d.version}" not in gone})


def _direct(d: DistCapture, target: Target, out: Installs) -> None:
    try:
        how = _install_direct(d, target)
    except MegacppEnvError as exc:
        out.failed.append(Unrecreated(what=f"{d.name} {d.version}", why=f"{d.origin} install failed: {exc}",
                                      remedy="fix the cause and run reproduce again"))  # fmt: skip
        return
    if isinstance(how, Unrecreated):
        out.failed.append(how)
    else:
        out.done[d.key] = how


def _checkout(d: DistCapture, name: str, target: Target) -> Path | Unrecreated:
    found = target.checkouts.get(name)
    if found is None:
        return Unrecreated(what=f"{d.name} {d.version}", why=f"its checkout {name or '(unknown)'} was not re-created",
                           remedy="see why that checkout could not be re-created")  # fmt: skip
    return found


def _install_direct(d: DistCapture, target: Target) -> str | Unrecreated:
    url = str((d.direct_url or {}).get("url", ""))
    if d.origin == "local-build" and d.build is not None:
        where = _checkout(d, d.build.checkout, target)
        if isinstance(where, Unrecreated):
            return where
        rebuild.build_and_install(where, target.python, target.prefix, build_env=d.build.build_env,
                                  installer=d.installer or "pip")  # fmt: skip
        return "rebuilt"
    if d.origin == "editable":
        where = _checkout(d, _token_name(url), target)
        if isinstance(where, Unrecreated):
            return where
        pyenv.install_direct(target.python, str(where), d.installer, editable=True)
        return "editable"
    if d.origin == "vcs":
        vcs = (d.direct_url or {}).get("vcs_info") or {}
        pyenv.install_direct(target.python, f"{d.name} @ {vcs.get('vcs', 'git')}+{url}@{vcs.get('commit_id')}",
                             d.installer)  # fmt: skip
        return "vcs"
    return _archive(d, url, target)


def _token_name(url: str) -> str:
    """``file://{checkout:NAME}/sub`` -> NAME."""
    start = url.find("{checkout:")
    return url[start + len("{checkout:") :].split("}", 1)[0] if start >= 0 else ""


def _archive(d: DistCapture, url: str, target: Target) -> str | Unrecreated:
    if not url.startswith("file:"):
        pyenv.install_direct(target.python, f"{d.name} @ {url}", d.installer)
        return "url"
    name = unquote(urlsplit(url).path).rsplit("/", 1)[-1]
    places = [Path(unquote(urlsplit(target.roots.resolve(url)).path))]
    if target.mirror is not None:
        places.append(pyenv.find_links(target.mirror) / name)
    want = {a.sha256 for a in d.artifacts}
    for place in places:
        if place.is_file() and (not want or sha256_file(place) in want):
            pyenv.install_wheel(target.python, place, d.installer)
            return "url"
    return Unrecreated(what=f"{d.name} {d.version}", why=f"installed from the local file {name}, which is gone",
                       remedy=f"put {name} in a directory and pass --mirror DIR")  # fmt: skip


def _reconcile(cap: Capture, target: Target, out: Installs, say: Say) -> None:
    """Uninstall what the golden did not have; install on its own what resolution did not bring."""
    present = _present(target.python, target.prefix)
    extra = sorted(k for k in present if k not in cap.distributions)
    if extra:
        say(f"removing {len(extra)} distribution(s) the golden did not have")
        pyenv.uninstall(target.python, [present[k] for k in extra])
    missing = [d for d in cap.distributions.values() if d.key not in present and d.origin == "index"]
    missing = [d for d in missing if d.key in out.done]
    for d in missing:
        out.notes.append(f"{d.name} {d.version} was a dependency in the golden but nothing requires it now: "
                         "installed on its own (it is marked requested)")  # fmt: skip
    out.failed += pyenv.install_uv(
        target.python, [d for d in missing if d.installer == "uv"], target.mirror, target.work
    )
    for d in (d for d in missing if d.installer == "pip"):
        try:
            pyenv.install_direct(target.python, f"{d.name}=={d.version}", "pip")
        except MegacppEnvError as exc:
            out.failed.append(pyenv.gone(d, exc, target.mirror))


def _present(python: Path, prefix: Path) -> dict[str, str]:
    """Distributions installed inside ``prefix`` (key -> name)."""
    probe = run_probe(str(python), {})
    root = str(prefix.resolve())
    return {
        dist_key(e["name"]): e["name"]
        for e in probe.data.get("distributions", [])
        if e.get("name") and str(Path(e["path"]).resolve()).startswith(root + "/")
    }
