"""Issue 28: a warm snapshot never says "no drift" when something drifted. One test per defect,
each through the real verbs (``snapshot --golden``, ``--check-golden``, ``run --golden``) with a
real venv, real git checkouts and the real caches, warmed by earlier snapshots; each failed before
the fix (the warm answer differed from ``--no-cache``'s)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from megacpp_env import cli
from tests.fixtures.git_repos import FILE_OK, make_repo
from tests.fixtures.snapshot import Venv, make_wheel

PAST = time.time() - 3600  # older than every cache's racy window


def backdate(*roots: Path) -> None:
    for root in roots:
        for here, dirs, files in os.walk(root):
            for name in [*dirs, *files]:
                p = Path(here, name)
                if not p.is_symlink():
                    os.utime(p, (PAST, PAST))
        os.utime(root, (PAST, PAST))


class Box:
    """A machine: a venv, a checkout, a cache and a golden directory; the verbs run in-process."""

    def __init__(self, tmp: Path, venv: Venv, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
        self.tmp, self.venv, self.capsys = tmp, venv, capsys
        self.co = tmp / "co"
        make_repo(self.co, {"train.py": "print('ok')\n", "pkg/__init__.py": "", ".gitignore": "build/\n"})
        self.cache = tmp / "cache"
        monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(self.cache))
        monkeypatch.delenv("VIRTUAL_ENV", raising=False)
        monkeypatch.chdir(tmp)

    def verb(self, *argv: str) -> tuple[int, str]:
        self.capsys.readouterr()
        code = cli.main(list(argv))
        out = self.capsys.readouterr()
        return code, out.out + out.err

    def snapshot(self, *extra: str) -> tuple[int, str]:
        return self.verb("snapshot", "--python", str(self.venv.python), "--paths", str(self.co),
                         "--golden-dir", str(self.tmp / "gd"), *extra)  # fmt: skip

    def golden_then_warm(self) -> None:
        backdate(self.venv.root, self.co)
        code, out = self.snapshot("--golden", "g")
        assert code == 0, out
        for _ in range(2):
            assert self.snapshot()[0] == 0

    def verdicts(self) -> dict[str, int]:
        """The exit codes of --check-golden (warm, and --no-cache) and run --golden (warm)."""
        warm = self.snapshot("--check-golden", "g")[0]
        cold = self.snapshot("--check-golden", "g", "--no-cache")[0]
        ran = self.verb("run", "--golden", "g", "--golden-dir", str(self.tmp / "gd"), "--python",
                        str(self.venv.python), "--paths", str(self.co), "--", sys.executable, "-c", "pass")[0]  # fmt: skip
        return {"warm": warm, "cold": cold, "run": ran}


@pytest.fixture
def box(tmp_path: Path, snap_venv: Venv, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Box:
    return Box(tmp_path, snap_venv, monkeypatch, capsys)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "core.hooksPath=/dev/null", *args], cwd=repo, check=True, capture_output=True)


def _flag(box: Box, flag: str) -> None:
    _git(box.co, "update-index", flag, "train.py")


def _evil_edit(box: Box) -> None:
    (box.co / "train.py").write_text("print('EVIL')\n")


def _hidden_so(box: Box, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if how == "info-exclude":
        (box.co / ".git" / "info").mkdir(exist_ok=True)
        (box.co / ".git" / "info" / "exclude").write_text("*.so\n")
    elif how == "global":
        ignore = box.tmp / "global-ignore"
        ignore.write_text("*.so\n")
        (box.tmp / "gitconfig").write_text(f"[core]\n\texcludesFile = {ignore}\n")
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(box.tmp / "gitconfig"))
    elif how == "home":  # git's default core.excludesFile, in the user's own HOME
        (box.tmp / "home" / ".config" / "git").mkdir(parents=True)
        (box.tmp / "home" / ".config" / "git" / "ignore").write_text("*.so\n")
        monkeypatch.setenv("HOME", str(box.tmp / "home"))
        monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    elif how == "untracked-gitignore":
        (box.co / "pkg" / ".gitignore").write_text("*\n")


@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
def test_an_index_flag_never_blinds_a_warm_snapshot(box: Box, flag: str) -> None:
    _flag(box, flag)
    box.golden_then_warm()
    _evil_edit(box)
    assert box.verdicts() == {"warm": 1, "cold": 1, "run": 1}


@pytest.mark.parametrize("how", ["info-exclude", "global", "home", "untracked-gitignore"])
def test_an_ignore_source_never_hides_a_new_file_from_a_warm_snapshot(
    box: Box, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hidden_so(box, how, monkeypatch)
    box.golden_then_warm()
    (box.co / "pkg" / "_evil.so").write_bytes(b"\x7fELF")
    assert box.verdicts() == {"warm": 1, "cold": 1, "run": 1}


def test_a_module_a_pth_imports_is_live_every_time(box: Box) -> None:
    """Defect 2: a ``.pth`` file's ``import zzhook``; zzhook.py edited in place to put a shadow
    directory with another version of a distribution first on sys.path."""
    site = box.venv.site
    (site / "zz.pth").write_text("import zzhook\n")
    (site / "zzhook.py").write_text("import sys\n" + "#" * 600 + "\n")
    shadow = box.tmp / "shadow"
    shadow.mkdir()
    make_wheel(box.tmp, "other-thing", "9.9.9", {"other_thing.py": "X = 9\n"})
    with __import__("zipfile").ZipFile(box.tmp / "other_thing-9.9.9-py3-none-any.whl") as zf:
        zf.extractall(shadow)
    box.golden_then_warm()
    before = (site / "zzhook.py").stat()
    line = f"sys.path.insert(0, {str(shadow)!r})"
    body = ("import sys\n" + line + "\n").ljust(before.st_size, "#")[: before.st_size - 1] + "\n"
    (site / "zzhook.py").write_text(body)  # same size (a new mtime: with the old one python itself would
    # run its cached byte-code, whose key is the source's size and mtime)
    verdicts = box.verdicts()
    assert verdicts == {"warm": 1, "cold": 1, "run": 1}
    _code, out = box.snapshot("--json")
    doc = json.loads(out[: out.rindex("}") + 1])
    assert str(shadow) == doc["facts"]["python"]["interpreter"]["sys_path"][0]


def _record_row(box: Box, row: str) -> None:
    record = next(box.venv.site.glob("demo_pkg-*.dist-info")) / "RECORD"
    record.write_text(record.read_text() + row + "\n")


@pytest.mark.parametrize(
    "row",
    [
        "demo_pkg/huge.py,sha256=x," + "9" * 5000,  # int() of 4,300+ digits
        '"demo_pkg/nul\x00.py",sha256=x,3',  # a NUL in a quoted path
        "../../../../../../etc/hostname,sha256=x,3",  # outside the environment
    ],
)
def test_one_hostile_record_row_stays_local(box: Box, row: str) -> None:
    """Defect 3: the row is a finding of its distribution; every other one is still verified, and a
    golden taken with it still sees an edit of another package."""
    _record_row(box, row)
    box.golden_then_warm()
    code, out = box.snapshot("--json", "--no-cache")
    doc = json.loads(out[: out.rindex("}") + 1])
    dists = doc["facts"]["python"]["distributions"]
    assert code == 0 and dists["demo-pkg"]["integrity"]["status"] == "drifted"
    assert set(dists["demo-pkg"]["integrity"]) & {"malformed", "outside"}
    assert dists["other-thing"]["integrity"]["status"] == "ok"
    target = box.venv.site / "other_thing.py"
    st = target.stat()
    target.write_text("X = 3\n")  # same size
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert box.verdicts() == {"warm": 1, "cold": 1, "run": 1}


def test_an_errored_section_fails_the_snapshot_and_is_never_stored_as_a_golden(box: Box) -> None:
    """An area that could not be read: the snapshot exits 1 and --golden refuses it; a golden that
    holds one (stored by an older version) never compares equal."""
    from megacpp_env.snapshot import golden as golden_mod
    from megacpp_env.snapshot.document import Snapshot

    code, out = box.verb("snapshot", "--python", str(box.venv.python), "--paths", str(box.tmp / "nope"),
                         "--golden-dir", str(box.tmp / "gd"), "--golden", "bad")  # fmt: skip
    assert code == 1 and "not stored" in out and not (box.tmp / "gd" / "bad.json").exists()
    box.golden_then_warm()
    stored = golden_mod.load_golden(box.tmp / "gd", "g")
    broken = Snapshot(facts={**stored.facts, "python": {"error": "an old version's failure"}}, live=stored.live,
                      host=stored.host, timing=stored.timing)  # fmt: skip
    (box.tmp / "gd" / "g.json").write_text(broken.to_json())
    assert box.verdicts() == {"warm": 1, "cold": 1, "run": 1}


def _cache_files(box: Box) -> list[Path]:
    return sorted(p for p in box.cache.rglob("*") if p.is_file() and not p.name.startswith("."))


def _unsealed(data: bytes) -> bytes:
    from megacpp_env.snapshot.verify import cachefile

    return data[len(cachefile.MAGIC) + cachefile.TAG_BYTES :] if data.startswith(cachefile.MAGIC) else data


def test_a_cache_rewritten_to_bless_a_tampered_file_is_not_trusted(box: Box) -> None:
    """Defect 4: a unit cache entry rewritten to a same-size tampered file's stat (its old digest
    kept): the file is hashed again."""
    import marshal

    box.golden_then_warm()
    target = box.venv.site / "demo_pkg" / "ops" / "x.py"
    st = target.stat()
    target.write_text(target.read_text().replace("+ 1", "+ 2"))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = target.stat()
    for unit in (p for p in _cache_files(box) if p.suffix == ".bin"):
        data = unit.read_bytes()
        try:
            cache = marshal.loads(_unsealed(data))
        except (ValueError, EOFError, TypeError):
            continue
        hit = cache.get("hashes", {}).get(str(target))
        if hit:
            cache["hashes"][str(target)] = [now.st_size, now.st_mtime_ns, now.st_ino, now.st_ctime_ns, hit[4]]
            blob = marshal.dumps(cache)
            unit.write_bytes(data[: len(data) - len(_unsealed(data))] + blob)
    assert box.verdicts() == {"warm": 1, "cold": 1, "run": 1}


@pytest.mark.parametrize("kind", ["fifo", "directory", "truncated", "other-owner", "group-writable"])
def test_a_bad_cache_entry_is_discarded_never_trusted_never_waited_on(box: Box, kind: str) -> None:
    """Defect 4: each cache file replaced by a FIFO or a directory, truncated, given to another owner
    or made group-writable: the snapshot finishes, equals --no-cache's, and notes what it discarded."""
    box.golden_then_warm()
    for path in _cache_files(box):
        if kind == "fifo":
            path.unlink()
            os.mkfifo(path)
        elif kind == "directory":
            path.unlink()
            path.mkdir()
        elif kind == "truncated":
            path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 2)])
        elif kind == "other-owner":
            os.chown(path, 65534, 65534)
        else:
            path.chmod(0o664)
    warm = box.snapshot("--json")
    cold = box.snapshot("--json", "--no-cache")
    docs = [json.loads(out[: out.rindex("}") + 1]) for _code, out in (warm, cold)]
    assert warm[0] == cold[0] == 0 and docs[0]["digest"] == docs[1]["digest"]
    assert docs[0]["live"]["cache"]["notes"]  # what was discarded is said
    again = box.snapshot("--json")  # and a later snapshot still works (a directory named like an entry)
    assert again[0] == 0


def test_a_file_renamed_over_while_it_is_hashed_is_hashed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 5: the path is stat-ed again after hashing; a file renamed over it meanwhile is not
    the file that was hashed."""
    import hashlib

    from megacpp_env.snapshot.verify import integrity_worker as one

    path = tmp_path / "lib.so"
    path.write_bytes(b"a" * (4 << 20))
    other = tmp_path / "other.so"
    other.write_bytes(b"b" * (4 << 20))
    real_new = hashlib.new
    swapped: list[bool] = []

    class Swapping:
        def __init__(self, algo: str) -> None:
            self.h = real_new(algo)

        def update(self, data: object) -> None:
            if not swapped:
                swapped.append(True)
                os.replace(other, path)  # renamed over while the old one is read
            self.h.update(data)  # type: ignore[arg-type]

        def digest(self) -> bytes:
            return self.h.digest()

    monkeypatch.setattr(hashlib, "new", Swapping)
    got = one.hash_file(str(path), "sha256", 4 << 20)
    import base64

    want = "sha256=" + base64.urlsafe_b64encode(real_new("sha256", b"b" * (4 << 20)).digest()).rstrip(b"=").decode()
    assert got == want  # the file now at the path, not the one renamed away


def test_the_nvml_child_loads_this_megacpp_env_from_an_editable_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 6: the child runs ``python -I -S``: an editable install's import hook never runs there.
    With a stand-in pynvml (no driver library) and no path to megacpp-env on sys.path, the child
    still loads megacpp-env's reader and answers with NVML's own error, never an ImportError (which
    the collector reads as "nvidia-ml-py not installed")."""
    from megacpp_env.snapshot.collectors import gpu

    stand_in = tmp_path / "stand-in"
    stand_in.mkdir()
    (stand_in / "pynvml.py").write_text(
        "class NVMLError(Exception):\n    pass\n"
        "class NVMLError_LibraryNotFound(NVMLError):\n    pass\n"
        "def nvmlInit():\n    raise NVMLError_LibraryNotFound('stand-in: no libnvidia-ml')\n"
        "def nvmlShutdown(): pass\n"
    )
    import megacpp_env

    home = str(Path(megacpp_env.__file__).resolve().parent.parent)
    kept = [p for p in sys.path if p and Path(p).resolve() != Path(home) and not (Path(p) / "megacpp_env").is_dir()]
    monkeypatch.setattr(sys, "path", [str(stand_in), *kept])
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    with pytest.raises(Exception) as raised:  # NVML's own answer, from the child that loaded both
        gpu.read_apart(None)
    assert type(raised.value).__name__ == "NVMLError_LibraryNotFound"
    assert not isinstance(raised.value, ImportError)


def test_cache_files_are_sealed_and_the_key_is_private(box: Box) -> None:
    from megacpp_env.snapshot.verify import cachefile

    box.golden_then_warm()
    key = box.cache / cachefile.KEY_NAME
    assert key.stat().st_mode & 0o777 == 0o600 and key.stat().st_size == cachefile.KEY_BYTES
    assert all(p.read_bytes().startswith(cachefile.MAGIC) for p in _cache_files(box))
    assert shutil.which("git")  # the checkout of every test above is a real repository
    assert (box.co / ".git").is_dir() and FILE_OK


@pytest.mark.parametrize("what", ["key", "entry"])
def test_a_cache_file_removed_between_its_lstat_and_its_open_is_absent_not_a_traceback(
    what: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key (and a cache entry) is lstat-ed, then opened: a file another process removes in between is
    read as removed (a note; the key is made again on the next run), never an uncaught FileNotFoundError."""
    from megacpp_env.snapshot.verify import cachefile

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    key, note = cachefile.load_key(str(cache))
    assert key is not None and note is None
    entry = cache / "one.entry"
    assert cachefile.write(str(entry), b"payload", key) is None
    assert cachefile.read(str(entry), key, 1 << 20).payload == b"payload"
    victim = cache / cachefile.KEY_NAME if what == "key" else entry
    real_open = os.open

    def open_after_removal(path: str, flags: int, *args: int) -> int:
        if Path(path) == victim:
            victim.unlink(missing_ok=True)
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", open_after_removal)
    if what == "key":
        got, note = cachefile.load_key(str(cache), create=False)
        assert got is None and note == f"{victim}: removed while read: caches not used"
    else:
        assert cachefile.read(str(entry), key, 1 << 20) == cachefile.Entry()
