"""The world each mutation starts from: a small real venv, a real git checkout, a home directory.

Built once per session as a *template* (``build_template``) and copied, for every example, to the
same path (``World.reset``): the snapshot records paths, so a golden taken at that path once is
valid for every copy. Every file's mtime lies well in the past (``BASE_TIME``): the caches refuse
what changed within 2 s of a snapshot, and a copy must warm them like a box that sat idle.

The venv (``python -m venv --without-pip``, filled with ``uv pip install`` from wheels built here):

- ``alpha 1.0``: a package with a subpackage, a 4.5 MiB data file (a *big* file, hashed by the
  parent, cached in its own file) and a console script (a ``../../../bin`` RECORD row);
- ``beta 2.0`` (one module), ``six 1.0`` (the one the shadow directory shadows);
- ``hookpkg 1.0``: ``hooked.pth`` (``import hooked``) and ``hooked.py``, both in its RECORD;
- by hand, in no RECORD: ``zzhook.pth`` (``import zzhook``) and ``zzhook.py``, a user's startup
  hook, and a ``sitecustomize.py`` (which ``site`` imports with no ``.pth`` at all).

``shadow/`` holds ``six 9.9.9`` (module and dist-info); nothing puts it on ``sys.path`` until a
mutation does. The checkout ``co`` has tracked files (one, ``ex_tracked.so``, named like what
``.git/info/exclude`` hides), an untracked file hidden by that exclude (``ex_prebuilt.so``) and a
plain untracked one (``notes.txt``). Each ignore source a mutation may switch on hides its own
prefix (``IGNORE_PREFIX``), so a file is hidden by exactly one of them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.fixtures.snapshot import make_wheel

BASE_TIME = 1_700_000_000  # 2023-11-14: every template file's mtime (seconds)
INDEX_TIME = BASE_TIME + 60  # the git index is younger than the files it describes (not racy)
BIG_SIZE = (4 << 20) + 4096  # over integrity.BIG_FILE (4 MiB): hashed by the parent, cached apart
GOLDEN = "g"

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Differential",
    "GIT_AUTHOR_EMAIL": "diff@example.invalid",
    "GIT_COMMITTER_NAME": "Differential",
    "GIT_COMMITTER_EMAIL": "diff@example.invalid",
    "GIT_AUTHOR_DATE": "2023-11-14T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2023-11-14T00:00:00+0000",
}

# ignore source -> the file-name prefix it hides (``ig_`` is the checkout's own, tracked .gitignore)
IGNORE_PREFIX = {
    "info-exclude": "ex_",
    "home-gitconfig": "gh_",
    "xdg-config": "gx_",
    "git-config-global": "gg_",
    "git-config-system": "sy_",
    "local-config": "lo_",
    "env-config": "en_",
    "default-global-ignore": "gd_",
    "gitignore": "ig_",
}

TRACKED = {
    "train.py": "import model.layer\n\n\ndef main():\n    return model.layer.forward(3)\n",
    "model/__init__.py": "",
    "model/layer.py": "def forward(x):\n    return x * 2\n",
    "ex_tracked.so": "\x7fELF not really a library, but named like one\n",
    "README.md": "A training checkout.\n",
    ".gitignore": "*.log\nig_*\n",
}
UNTRACKED = {"ex_prebuilt.so": "\x7fELF a prebuilt extension nobody committed\n", "notes.txt": "todo: tune lr\n"}


def _hook(body: str, width: int) -> str:
    """A module of exactly ``width`` bytes: ``body``, then a comment line padding it out."""
    rest = width - len(body) - 1
    assert rest >= 2, body
    return f"{body}\n#{'-' * (rest - 2)}\n"


@dataclass(frozen=True, kw_only=True, slots=True)
class World:
    """The paths of one world, and the environment every CLI call of it runs in."""

    root: Path

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def site(self) -> Path:
        return next((self.venv / "lib").glob("python3*/site-packages"))

    @property
    def shadow(self) -> Path:
        return self.root / "shadow"

    @property
    def checkout(self) -> Path:
        return self.root / "co"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def cold_cache(self) -> Path:
        return self.root / "cold-cache"

    @property
    def cwd(self) -> Path:
        return self.root / "cwd"

    @property
    def runs(self) -> Path:
        return self.root / "runs.jsonl"

    def hook_text(self, evil: bool) -> str:
        """``zzhook.py``/``hooked.py``: harmless, or (same size) putting ``shadow/`` first on sys.path."""
        evil_body = f"import sys; sys.path.insert(0, {str(self.shadow)!r})"
        body = evil_body if evil else "import sys; HOOKED = True"
        return _hook(body, len(evil_body) + 40)

    def env(self, *, cache: Path | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of every call: nothing from this machine's user, git's system and global
        configuration files inside the world, no active venv (``--python`` names it)."""
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "GIT_CONFIG_SYSTEM": str(self.etc / "gitconfig"),
            "MEGACPP_ENV_CACHE_DIR": str(cache or self.cache),
            "NO_COLOR": "1",
            "CI": "true",
        }
        env.update(extra or {})
        return env

    def reset(self, template: Path) -> None:
        """This world as the template left it (mtimes kept; inodes and ctimes new, as after a copy)."""
        if self.root.exists():
            remove_tree(self.root)
        shutil.copytree(template, self.root, symlinks=True)
        for path in (self.cache, self.cold_cache):
            path.mkdir(mode=0o700)

    def git(self, *args: str, env: dict[str, str] | None = None) -> str:
        """git in the checkout, under this world's configuration."""
        done = subprocess.run(
            ["git", *args],
            cwd=self.checkout,
            env={**self.env(), **GIT_IDENTITY, **(env or {})},
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout


def remove_tree(path: Path) -> None:
    """``rm -rf`` that also takes what a mutation left unwritable or owned by another user."""
    for dirpath, dirnames, _files in os.walk(path):
        for name in dirnames:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                os.chmod(full, 0o700)
    shutil.rmtree(path)


def backdate(root: Path, *, since: float) -> None:
    """Every file and directory under ``root`` changed at ``since`` or later gets ``BASE_TIME``
    (a git index ``INDEX_TIME``): as if it had changed long before the snapshots that follow."""
    for path in _walk(root):
        st = path.lstat()
        if st.st_mtime >= since - 1:
            stamp = INDEX_TIME if path.name == "index" and path.parent.name == ".git" else BASE_TIME
            os.utime(path, (stamp, stamp), follow_symlinks=False)


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*filenames, *dirnames]:
            yield Path(dirpath, name)
    yield root


def _wheels(world: World, into: Path) -> list[Path]:
    alpha = {
        "alpha/__init__.py": "from alpha.core import run\n",
        "alpha/core.py": "def run():\n    return 'alpha'\n",
        "alpha/sub/__init__.py": "",
        "alpha/sub/deep.py": "DEPTH = 3\n",
        "alpha/_ext.so": "\x7fELF pretend extension module\n",
        "alpha/big.bin": "\x00\x01\x02\x03" * (BIG_SIZE // 4),
        "alpha-1.0.dist-info/entry_points.txt": "[console_scripts]\nalpha-cli = alpha:run\n",
    }
    return [
        make_wheel(into, "alpha", "1.0", alpha),
        make_wheel(into, "beta", "2.0", {"beta.py": "BETA = 2\n"}),
        make_wheel(into, "six", "1.0", {"six.py": "__version__ = '1.0'\n"}),
        make_wheel(into, "hookpkg", "1.0", {"hooked.pth": "import hooked\n", "hooked.py": world.hook_text(False)}),
    ]


def _venv(world: World, wheels: list[Path]) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(world.venv)], check=True, capture_output=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "uv",
            "pip",
            "install",
            "--python",
            str(world.python),
            "--no-deps",
            "--offline",
            "--no-cache",
            "--link-mode",
            "copy",
            "--quiet",
            *map(str, wheels),
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "UV_NO_CONFIG": "1"},
    )
    (world.site / "zzhook.pth").write_text("import zzhook\n")
    (world.site / "zzhook.py").write_text(world.hook_text(False))
    (world.site / "sitecustomize.py").write_text(world.hook_text(False))  # imported by site itself
    shadow_info = world.shadow / "six-9.9.9.dist-info"
    shadow_info.mkdir(parents=True)
    (world.shadow / "six.py").write_text("__version__ = '9.9.9'\n")
    (shadow_info / "METADATA").write_text("Metadata-Version: 2.1\nName: six\nVersion: 9.9.9\n")
    # the startup hooks' byte code written now, as on a box that ran once: not by the first snapshot
    subprocess.run([str(world.python), "-c", "pass"], check=True, capture_output=True, env={"PATH": "/usr/bin:/bin"})


def _checkout(world: World) -> None:
    co = world.checkout
    co.mkdir()
    for rel, text in {**TRACKED, **UNTRACKED}.items():
        (co / rel).parent.mkdir(parents=True, exist_ok=True)
        (co / rel).write_text(text)
    world.git("init", "--quiet", "-b", "main")
    world.git("add", *TRACKED)
    world.git("commit", "--quiet", "-m", "initial")
    (co / ".git" / "info").mkdir(exist_ok=True)
    (co / ".git" / "info" / "exclude").write_text(f"{IGNORE_PREFIX['info-exclude']}*\n")


def build_template(template: Path, world: World) -> None:
    """Make the world at ``world.root`` (the path every example uses), then move it to ``template``."""
    if world.root.exists():
        remove_tree(world.root)
    world.root.mkdir(parents=True)
    for path in (world.home, world.etc, world.cwd):
        path.mkdir()
    (world.etc / "gitconfig").write_text("")
    wheels = world.root / "wheels"
    wheels.mkdir()
    _venv(world, _wheels(world, wheels))
    shutil.rmtree(wheels)
    _checkout(world)
    backdate(world.root, since=0)
    world.root.rename(template)
