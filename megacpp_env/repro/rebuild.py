"""Build a distribution from a checkout into a wheel, install it, and leave a build record: the one
place ``reproduce`` (and a bare-metal local build) turns a checkout into an installed wheel.

Builds are made reproducible so that a rebuild elsewhere gives the same bytes: ``SOURCE_DATE_EPOCH``
is the checkout's commit time (wheel timestamps) and ``-ffile-prefix-map=<checkout>=.`` is added
to ``CFLAGS``/``CXXFLAGS`` (no checkout path in debug info). The wheel is built by the source build's
own wheel step (``srcbuild.build.pip_wheel``: ``pip wheel --no-deps --no-build-isolation --no-index``
with the build env), in the checkout itself (its path is what ``-ffile-prefix-map`` maps), its
leftovers removed from the checkout afterwards, and kept in ``<venv>/megacpp-env/wheels/``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

from megacpp_env import __version__, git
from megacpp_env.fsutil import sha256_file
from megacpp_env.pip import run_pip
from megacpp_env.repro.pyenv import install_wheel
from megacpp_env.srcbuild.build import pip_wheel
from megacpp_env.worktree import content
from megacpp_env.worktree.buildrecord import CHECKOUT_TOKEN, BuildRecord, env_for, portable_env, write_build_record

WHEELS_DIR = ("megacpp-env", "wheels")
PREFIX_MAP = f"-ffile-prefix-map={CHECKOUT_TOKEN}=."


def wheels_dir(prefix: Path | str) -> Path:
    return Path(prefix).joinpath(*WHEELS_DIR)


def reproducible_env(checkout: Path, build_env: Mapping[str, str]) -> dict[str, str]:
    """``build_env`` in its portable form (the checkout's path as ``{checkout}``) plus what makes the
    build reproducible."""
    out = portable_env(dict(build_env), checkout)
    out.setdefault("SOURCE_DATE_EPOCH", str(git.commit_time(checkout)))
    for flags in ("CFLAGS", "CXXFLAGS"):
        if PREFIX_MAP not in out.get(flags, ""):
            out[flags] = f"{out.get(flags, '')} {PREFIX_MAP}".strip()
    return dict(sorted(out.items()))


def _untracked_all(root: Path) -> set[str]:
    raw = git.run_git(["ls-files", "--others", "--directory", "-z"], root).stdout
    return {os.fsdecode(p).rstrip("/") for p in raw.split(b"\0") if p}


def _remove_leftovers(root: Path, before: set[str]) -> None:
    for rel in sorted(_untracked_all(root) - before):
        path = root / rel
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def build_wheel(checkout: Path, python: Path, build_env: Mapping[str, str], wheel_dir: Path) -> Path:
    """One wheel of the checkout, built by ``python`` with ``build_env`` (``{checkout}`` resolved)."""
    env = env_for(dict(build_env), checkout)
    before = _untracked_all(checkout)
    with tempfile.TemporaryDirectory(prefix="megacpp-rebuild-") as tmp:
        try:
            built = pip_wheel(
                checkout, Path(tmp), lambda args: run_pip(python, args, cwd=checkout, env=env), what=str(checkout)
            )
        finally:
            _remove_leftovers(checkout, before)
        wheel_dir.mkdir(parents=True, exist_ok=True)
        dest = wheel_dir / built.name
        shutil.move(str(built), dest)
    return dest


def build_and_install(
    checkout: Path, python: Path, prefix: Path, *, build_env: Mapping[str, str], installer: str = "pip"
) -> BuildRecord:
    """Build ``checkout``, install the wheel into the environment at ``prefix`` (``installer``: the
    golden's), and write its build record there."""
    checkout = checkout.resolve()
    tree = content.read(checkout)
    state = (tree.head or "", tree.diff_hash(), tree.untracked_hash())
    env = reproducible_env(checkout, build_env)
    wheel = build_wheel(checkout, python, env, wheels_dir(prefix))
    install_wheel(python, wheel, installer)
    name, version, _build, _tags = parse_wheel_filename(wheel.name)
    record = BuildRecord(
        dist=canonicalize_name(name), version=str(version), checkout=str(checkout), commit=state[0],
        diff_hash=state[1], untracked_hash=state[2], build_env=env, wheel=wheel.name,
        wheel_sha256=sha256_file(wheel), builder=f"megacpp-env {__version__}",
    )  # fmt: skip
    write_build_record(prefix, record)
    return record
