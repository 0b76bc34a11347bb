"""``collect``: the image's last source step. Every built wheel installed together (``--no-deps
--no-index``), every path source put on ``sys.path`` by a ``.pth``, then the dependency check and
the sanity checks of every source, all in the target's Python. Never prints."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from megacpp_env.errors import RefusedError
from megacpp_env.records import Record
from megacpp_env.srcbuild.build import Progress, run_sanity
from megacpp_env.srcbuild.plan import SourcePlan
from megacpp_env.srcbuild.run import python_value, stream


@dataclass(frozen=True, kw_only=True, slots=True)
class CollectResult(Record):
    wheels: tuple[str, ...]
    paths: tuple[str, ...]
    pip_check: tuple[str, ...]
    sanity: tuple[str, ...]


def collect(
    plans: list[SourcePlan],
    *,
    python: Path,
    wheels: Path,
    src: Path,
    resolutions: Path | None = None,
    progress: Progress | None = None,
) -> CollectResult:
    """Install what each plan built (``wheels/<name>/*.whl``; path sources at ``src/<dist>``), then the
    dependency check and every plan's sanity checks. The check is ``python -m megacpp_env.depcheck
    --resolutions FILE`` (pip check plus exactly the target's declared resolutions) when the target's
    resolutions file is given (the tool is installed in that venv), else plain ``pip check``. Raises
    StepFailedError on the first failure."""
    say = progress or (lambda _line: None)
    files = [_one_wheel(wheels / p.name, p) for p in plans if p.install == "wheel"]
    if files:
        argv = [str(python), "-m", "pip", "install", "--no-deps", "--no-index", *map(str, files)]
        stream(argv, cwd=wheels, env=_env(), source="collect", step="install", on_line=say)
    paths = [_path_source(python, src / p.dist, p) for p in plans if p.install == "path"]
    check_argv = (
        ["-m", "megacpp_env.depcheck", "--resolutions", str(resolutions)] if resolutions else ["-m", "pip", "check"]
    )
    check = stream([str(python), *check_argv], cwd=wheels, env=_env(), source="collect", step="dependency check",
                   on_line=say)  # fmt: skip
    sanity = run_sanity(plans, python, say)
    return CollectResult(wheels=tuple(map(str, files)), paths=tuple(paths), pip_check=tuple(check), sanity=sanity)


def _one_wheel(directory: Path, plan: SourcePlan) -> Path:
    found = sorted(directory.glob("*.whl"))
    if len(found) != 1:
        raise RefusedError(f"{plan.name}: expected exactly one wheel in {directory}, found {len(found)}")
    return found[0]


def _path_source(python: Path, checkout: Path, plan: SourcePlan) -> str:
    if not (checkout / ".git").exists():
        raise RefusedError(f"{plan.name}: {checkout} is not a checkout (its source stage makes it)")
    purelib = Path(python_value(python, "import sysconfig; print(sysconfig.get_paths()['purelib'])"))
    (purelib / f"megacpp-src-{plan.dist}.pth").write_text(f"{checkout.resolve()}\n", encoding="utf-8")
    return str(checkout)


def _env() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env
