"""Re-create the golden's virtual environment: the same Python, made the same way, holding the same
distributions installed by the same installer, each marked requested exactly as in the golden.

- The interpreter: ``--python``, else the golden's base interpreter if it is still there, else
  ``python3.X`` on PATH, else ``uv python find``; its version must equal the golden's.
- The venv: ``python -m venv`` (with pip when the golden's pip came from ensurepip) or ``uv venv``,
  as ``pyvenv.cfg`` said, with the golden's ``include-system-site-packages``.
- uv-installed distributions: one ``uv pip install --no-deps`` (uv marks every one requested, as it
  did in the golden); pip-installed ones: ``pip install -r REQUESTED -c PINS`` so that only what the
  golden requested is marked requested (the others arrive as dependencies). Artifact hashes are
  passed where the capture knows them; the installed files are then proved against the golden's
  RECORDs by the final comparison in any case.
- ``--mirror DIR``: a directory of wheels (or a ``megacpp-env mirror`` store) instead of the indexes.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from megacpp_env import uv
from megacpp_env.errors import MegacppEnvError, RefusedError, ToolError
from megacpp_env.pip import run_pip
from megacpp_env.repro.document import DistCapture, PythonCapture
from megacpp_env.repro.outcome import Unrecreated
from megacpp_env.snapshot.proc import run_program

VERSION_PROBE = "import platform; print(platform.python_implementation(), platform.python_version())"
INSTALLERS = ("pip", "uv")


def python_identity(python: str) -> tuple[str, str]:
    """(implementation, version) of ``python``."""
    out = run_program([python, "-c", VERSION_PROBE], timeout=30).stdout.split()
    if len(out) != 2:
        raise ToolError(f"{python}: cannot tell its version")
    return out[0], out[1]


def _candidates(cap: PythonCapture) -> Iterable[str]:
    minor = ".".join(cap.version.split(".")[:2])
    for name in (f"python{minor}", "python3"):
        yield str(Path(cap.base_prefix) / "bin" / name)
    for name in (f"python{minor}", "python3"):
        found = shutil.which(name)
        if found:
            yield found
    try:
        yield uv.run_uv(["python", "find", "--no-config", cap.version]).stdout.strip()
    except MegacppEnvError:
        return


def find_python(cap: PythonCapture, explicit: str | None) -> str:
    """An interpreter of exactly the golden's implementation and version; RefusedError naming both."""
    want = (cap.implementation, cap.version)
    if explicit:
        got = python_identity(explicit)
        if got != want:
            raise RefusedError(f"--python {explicit} is {' '.join(got)}; the golden ran {' '.join(want)}")
        return explicit
    for candidate in _candidates(cap):
        if candidate and Path(candidate).is_file() and _is(candidate, want):
            return candidate
    raise RefusedError(
        f"no {' '.join(want)} interpreter here (the golden ran {cap.executable}): install it "
        f"(e.g. `uv python install {cap.version}`) and pass --python PATH"
    )


def _is(python: str, want: tuple[str, str]) -> bool:
    try:
        return python_identity(python) == want
    except MegacppEnvError:
        return False


def make_venv(python: str, dest: Path, cap: PythonCapture, *, with_pip: bool) -> Path:
    """A fresh environment at ``dest`` made as the golden's was; returns its interpreter."""
    system = ["--system-site-packages"] if cap.system_site_packages else []
    if cap.maker in ("uv", "virtualenv"):
        uv.run_uv(["venv", "--no-config", "--quiet", "--python", python, *system, str(dest)])
    else:
        pip = [] if with_pip else ["--without-pip"]
        named = Path(python).parent / cap.creator  # ensurepip writes the name it was run by into shebangs
        runner = str(named) if cap.creator and named.is_file() else python
        run_program([runner, "-m", "venv", *system, *pip, str(dest)], timeout=300)
    return dest / "bin" / "python"


def _line(d: DistCapture, *, hashes: bool) -> str:
    pins = " ".join(f"--hash=sha256:{a.sha256}" for a in d.artifacts) if hashes else ""
    return f"{d.name}=={d.version} {pins}".strip()


def find_links(mirror: Path) -> Path:
    """A ``megacpp-env mirror`` store installs from its ``files/``; any other directory as it is."""
    return mirror / "files" if (mirror / "mirror.json").is_file() else mirror


def _sources(mirror: Path | None) -> list[str]:
    return ["--no-index", "--find-links", str(find_links(mirror))] if mirror else []


def gone(d: DistCapture, exc: Exception, mirror: Path | None) -> Unrecreated:
    wheel = ", ".join(f"{a.filename} sha256:{a.sha256}" for a in d.artifacts) or f"tags {', '.join(d.tags) or '?'}"
    where = f"the mirror {mirror}" if mirror else "no index here"
    return Unrecreated(
        what=f"{d.name} {d.version}",
        why=f"{where} has it any more ({str(exc).splitlines()[-1][:200]})",
        remedy=f"put its wheel ({wheel}) in a directory and pass --mirror DIR "
        "(`megacpp-env mirror TARGET --to DIR` keeps a lock's wheels before an index prunes them)",
    )


def _each(
    install: Callable[[list[DistCapture]], None], dists: Sequence[DistCapture], mirror: Path | None
) -> list[Unrecreated]:
    """All at once; on failure, one by one, to name exactly the ones that cannot be installed."""
    if not dists:
        return []
    try:
        install(list(dists))
        return []
    except ToolError:
        pass
    out = []
    for d in dists:
        try:
            install([d])
        except ToolError as exc:
            out.append(gone(d, exc, mirror))
    return out


def install_uv(python: Path, dists: Sequence[DistCapture], mirror: Path | None, work: Path) -> list[Unrecreated]:
    def install(group: list[DistCapture]) -> None:
        req = work / "uv-requirements.txt"
        req.write_text("".join(_line(d, hashes=True) + "\n" for d in group), encoding="utf-8")
        uv.run_uv(["pip", "install", "--python", str(python), "--no-deps", "-r", str(req), *_sources(mirror)])

    return _each(install, dists, mirror)


def install_pip(python: Path, dists: Sequence[DistCapture], pins: Sequence[DistCapture], mirror: Path | None,
                work: Path) -> tuple[list[Unrecreated], list[str]]:  # fmt: skip
    """The requested ones with ``-r``, the rest through resolution inside ``-c`` pins (hashed when
    every pinned artifact is known; a pip too old for hashes in constraints is retried without)."""
    requested = [d for d in dists if d.requested]
    hashed = all(d.artifacts for d in pins)
    notes: list[str] = []

    def install(group: list[DistCapture], hashes: bool = hashed) -> None:
        (work / "pip-requested.txt").write_text("".join(_line(d, hashes=hashes) + "\n" for d in group), "utf-8")
        (work / "pip-pins.txt").write_text("".join(_line(d, hashes=hashes) + "\n" for d in pins), "utf-8")
        args = ["install", "-r", str(work / "pip-requested.txt"), "-c", str(work / "pip-pins.txt"), *_sources(mirror)]
        try:
            run_pip(python, args)
        except ToolError as exc:
            if not hashes or ("--require-hashes" not in str(exc) and "pinned with ==" not in str(exc)):
                raise
            notes.append("this pip cannot check hashes given in constraints: installed by exact version; the "
                         "installed files were proved against the golden's RECORDs instead")  # fmt: skip
            install(group, hashes=False)

    failures = _each(install, requested, mirror)
    return failures, notes


def uninstall(python: Path, names: Sequence[str]) -> None:
    if names:
        uv.run_uv(["pip", "uninstall", "--python", str(python), *names])


def install_wheel(python: Path, wheel: Path, installer: str) -> None:
    """A locally built wheel, by the installer the golden used, without dependencies or an index."""
    if installer == "uv":
        uv.run_uv(["pip", "install", "--python", str(python), "--no-deps", "--no-index", str(wheel)])
    else:
        run_pip(python, ["install", "--no-deps", "--no-index", str(wheel)])


def install_direct(python: Path, requirement: str, installer: str, *, editable: bool = False) -> None:
    """``name @ url`` (vcs, archive) or ``-e DIR``, without dependencies."""
    args = ["-e", requirement] if editable else [requirement]
    if installer == "uv":
        uv.run_uv(["pip", "install", "--python", str(python), "--no-deps", *args])
    else:
        run_pip(python, ["install", "--no-deps", *args])


def scratch() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="megacpp-reproduce-")
