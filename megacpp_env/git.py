"""The one wrapper around the ``git`` executable. Every git call megacpp-env makes goes through
``run_git``, which logs the command line (logger ``megacpp_env.git``, level DEBUG) so tests, and a
caller that configures logging, can see exactly what ran. Never prints, never exits.

Output that is hashed (``diff_hash``) is made independent of user configuration by passing every
option that changes it explicitly (prefixes, renames, colour, external diff drivers, order files).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megacpp_env.errors import RefusedError, ToolError, ToolNotFoundError, one_line
from megacpp_env.redact import strip_url_credentials


class _Log:
    """``logging.getLogger("megacpp_env.git")``, imported only where something imported logging:
    a handler (``-v``, a caller's, pytest's) exists only then, and a snapshot's git calls need
    not pay for the import (~4 ms of the GIL its collectors share)."""

    @staticmethod
    def debug(msg: str, *args: object) -> None:
        logging = sys.modules.get("logging")
        if logging is not None:
            logging.getLogger("megacpp_env.git").debug(msg, *args)


log = _Log()

SHA_RE = re.compile(r"[0-9a-f]{40}")  # use with fullmatch
GITLINK_MODE = "160000"
SYMLINK_MODE = "120000"
# Variables that would redirect git to another repository or index than the one at ``cwd``.
_REPO_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR", "GIT_PREFIX")
# ... and, when reading, to other programs, object stores, replacement objects or config.
_PROGRAM_ENV = (
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_EXEC_PATH", "GIT_EXTERNAL_DIFF", "GIT_SSH", "GIT_SSH_COMMAND",
    "GIT_PROXY_COMMAND", "GIT_REPLACE_REF_BASE", "GIT_TEMPLATE_DIR", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR",
    "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_SYSTEM", "GIT_ATTR_SOURCE",
)  # fmt: skip
_READ_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_NO_LAZY_FETCH": "1",  # a read of a partial clone never fetches a missing object
    "GIT_PAGER": "cat",
    "PAGER": "cat",
}
# Keys that name a program, overridden for every read. Values: what disables them.
_NEUTRAL = {
    "core.fsmonitor": "false",
    "core.hooksPath": "/dev/null",
    "core.pager": "cat",
    "core.editor": "",
    "core.sshCommand": "",
    "core.gitProxy": "",
    "core.askPass": "",
    "core.alternateRefsCommand": "",
    "credential.helper": "",
    "diff.external": "",
    "gpg.program": "",
    "protocol.ext.allow": "never",
    "submodule.recurse": "false",
}
# Keys of named drivers (from the repository's own config) that name a program.
_DRIVER_KEY = re.compile(
    r"(?P<key>(?:filter\..+\.(?:clean|smudge|process)|diff\..+\.(?:textconv|command)|merge\..+\.driver"
    r"|credential\..+\.helper|gpg\..+\.program|difftool\..+\.cmd|mergetool\..+\.cmd)|pager\..+|filter\..+\.required)",
    re.IGNORECASE,
)
# The transports any git call may use, whatever the user's or a repository's configuration says:
# ``ext::`` and ``fd::`` (which run a command or read a descriptor) and every other remote helper
# are off; ``file`` keeps git's own default (``user``: not for a submodule a repository names)
# unless a caller turns it on for a URL the user gave.
_PROTOCOL_POLICY = {
    "protocol.allow": "never",
    "protocol.https.allow": "always",
    "protocol.http.allow": "always",
    "protocol.git.allow": "always",
    "protocol.ssh.allow": "always",
    "protocol.file.allow": "user",
    "protocol.ext.allow": "never",
    "protocol.fd.allow": "never",
}
# With a mirror every object comes from a local repository: no network transport at all.
OFFLINE_CONFIG = {
    **{f"protocol.{name}.allow": "never" for name in ("https", "http", "git", "ssh", "ext", "fd")},
    "protocol.allow": "never",
    "protocol.file.allow": "always",
}
# URL schemes a pinned source, a submodule or a mirror may use (git's ssh aliases included).
URL_SCHEMES = ("https", "http", "git", "ssh", "git+ssh", "ssh+git", "file")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_HELPER = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*::")  # <transport>::<address>: a remote helper
# Options that make ``git diff`` output independent of the user's git configuration (the context
# lines, the algorithm and its heuristic given as their defaults: a repository's config may set them).
DIFF_STABLE = (
    "--binary",
    "--full-index",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--ignore-submodules=dirty",
    "--submodule=short",
    "-O/dev/null",
    "-U3",
    "--inter-hunk-context=0",
    "--diff-algorithm=myers",
    "--indent-heuristic",
    "--no-relative",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class SubmoduleState:
    """One submodule (recursively): the commit its superproject pins and the commit checked out."""

    path: str  # relative to the top-level checkout, '/'-separated
    expected: str  # the gitlink in the superproject's HEAD
    actual: str | None  # HEAD of the submodule checkout; None when not initialised

    @property
    def matches(self) -> bool:
        return self.actual == self.expected

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "expected": self.expected, "actual": self.actual, "matches": self.matches}


def git_executable() -> str:
    exe = shutil.which("git")
    if exe is None:
        raise ToolNotFoundError("git is not on PATH (install git: apt-get install git)")
    return exe


def _env(extra: Mapping[str, str] | None, *, trusted: bool) -> dict[str, str]:
    drop = _REPO_ENV if trusted else (*_REPO_ENV, *_PROGRAM_ENV)
    env = {k: v for k, v in os.environ.items() if k not in drop and (trusted or not k.startswith("GIT_CONFIG_"))}
    env.update({"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": ""})
    if not trusted:
        env.update(_READ_ENV)
    env.update(extra or {})
    return env


def _driver_overrides(cwd: Path | str | None) -> dict[str, str]:
    """Every program-naming key the repository's config defines (includes followed), disabled."""
    if cwd is None or not Path(cwd).is_dir():
        return {}
    _refuse_special_git_files(Path(cwd))
    stamp = _config_stamp(Path(cwd))
    if stamp is not None and (hit := _DRIVER_CACHE.get(stamp)) is not None:
        return hit
    argv = [git_executable(), "config", "--list", "--includes", "-z"]
    try:
        proc = _spawn(argv, cwd=cwd, env=_env(None, trusted=False), input_bytes=None, trusted=False)
    except subprocess.TimeoutExpired as exc:
        raise _stopped("config --list", exc, cwd, "a FIFO among its config files") from None
    except OSError:
        return {}
    out: dict[str, str] = {}
    for entry in proc.stdout.split(b"\0"):
        key = os.fsdecode(entry.split(b"\n", 1)[0])
        m = _DRIVER_KEY.fullmatch(key)
        if m:
            out[key] = "false" if key.lower().endswith(".required") or key.lower().startswith("pager.") else ""
    if stamp is not None:
        _DRIVER_CACHE[stamp] = out
    return out


_DRIVER_CACHE: dict[tuple[object, ...], dict[str, str]] = {}
# Files of a git dir that every git command opens: a FIFO (or a device) in their place would block git
# until its deadline; refused at once instead. (Any other file git opens is covered by the deadline.)
_GIT_DIR_FILES = (
    "HEAD", "index", "config", "config.worktree", "commondir", "packed-refs", "shallow", "info/exclude",
    "info/attributes", "info/sparse-checkout", "info/grafts", "objects/info/alternates",
)  # fmt: skip


def _refuse_special_git_files(cwd: Path) -> None:
    """Raise ToolError when ``cwd/.git`` (or the git dir its gitfile names) holds something other than a
    regular file, a directory or a symlink where git opens a file."""
    dot_git = cwd / ".git"
    try:
        st = os.lstat(dot_git)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode):
        dot_git = _gitfile_target(cwd, dot_git)
    elif not stat.S_ISDIR(st.st_mode):
        _refuse_kind(dot_git, st.st_mode)
    for name in _GIT_DIR_FILES if dot_git.is_dir() else ():
        try:
            st = (dot_git / name).stat()
        except OSError:
            continue
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            _refuse_kind(dot_git / name, st.st_mode)


def _gitfile_target(cwd: Path, gitfile: Path) -> Path:
    """The git dir a ``.git`` file names (``gitdir: PATH``); the file itself when it names none."""
    try:
        with open(gitfile, "rb") as fh:
            first = fh.read(4096).split(b"\n", 1)[0].decode("utf-8", "replace")
    except OSError:
        return gitfile
    target = first.removeprefix("gitdir:").strip() if first.startswith("gitdir:") else ""
    return (cwd / target) if target else gitfile


def _refuse_kind(path: Path, mode: int) -> None:
    kind = next((what for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                                         (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
                 if test(mode)), "not a file")  # fmt: skip
    raise ToolError(
        one_line(f"{path} is {kind}, where git opens a file: git would wait on it; refusing to run git there "
                 "(make the checkout again)")
    )  # fmt: skip


def _config_stamp(cwd: Path) -> tuple[object, ...] | None:
    """A cache key for the config of the repository at ``cwd``: its real path and the size and
    mtime of ``.git/config`` (and the worktree config); None (no caching) for anything else."""
    dot_git = cwd / ".git"
    if not dot_git.is_dir():
        return None
    stamps: list[object] = [os.path.realpath(cwd)]
    for name in ("config", "config.worktree"):
        try:
            st = (dot_git / name).stat()
        except OSError:
            stamps.append(None)
        else:
            stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(stamps)


def read_config(cwd: Path | str | None) -> dict[str, str]:
    """The ``-c`` overrides every untrusted git call gets in ``cwd`` (see the module docstring)."""
    return {**_NEUTRAL, **_driver_overrides(cwd)}


def run_git(
    args: Sequence[str],
    cwd: Path | str | None = None,
    *,
    check: bool = True,
    config: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    input_bytes: bytes | None = None,
    trusted: bool = False,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git [-c k=v]... ARGS`` in ``cwd``; output is bytes. ``check`` raises ToolError on failure.
    ``trusted`` (making a checkout) keeps the user's git configuration and programs; every other call
    runs with ``read_config`` (no command the repository names is ever run)."""
    argv = [git_executable()]
    overrides = {**_PROTOCOL_POLICY, **(config or {}), **({} if trusted else read_config(cwd))}
    for key, value in overrides.items():
        argv += ["-c", f"{key}={value}"]
    argv += list(args)
    shown = strip_url_credentials(" ".join(args))
    user = [f"-c {k}={v}" for k, v in (config or {}).items()]  # the read_config overrides are not shown
    log.debug("git: %s (cwd=%s)", strip_url_credentials(" ".join([*user, *args])), cwd or ".")
    try:
        proc = _spawn(argv, cwd=cwd, env=_env(env, trusted=trusted), input_bytes=input_bytes, trusted=trusted)
    except subprocess.TimeoutExpired as exc:
        raise _stopped(shown, exc, cwd or ".", "a FIFO or a hung remote in the repository") from None
    except OSError as exc:  # a missing or unreadable cwd, an unusable git executable
        raise ToolError(f"git {shown} could not run in {cwd or '.'}: {exc.strerror or exc}") from None
    if check and proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        tail = strip_url_credentials(detail[-1]) if detail else f"exit {proc.returncode}"
        raise ToolError(f"git {shown} failed in {cwd or '.'}: {tail}")
    return proc


# Every git call has a deadline: a FIFO where git opens a file (.git/HEAD, index, config) blocks it for
# good, and so can a remote. Reads of a local repository get READ_TIMEOUT_S, fetches and checkouts
# (``trusted``) FETCH_TIMEOUT_S; $MEGACPP_ENV_GIT_TIMEOUT (seconds) sets both.
TIMEOUT_ENV = "MEGACPP_ENV_GIT_TIMEOUT"
READ_TIMEOUT_S = 120.0
FETCH_TIMEOUT_S = 3600.0


def timeout_s(*, trusted: bool) -> float:
    """The deadline of one git call (see ``TIMEOUT_ENV``). Read here, not with ``toolrun.env_seconds``:
    git.py is in the source builds' import closure, which stays small."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return FETCH_TIMEOUT_S if trusted else READ_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < 1e7:
        raise ToolError(f"{TIMEOUT_ENV}={raw[:40]!r}: expected a positive number of seconds")
    return value


def _spawn(
    argv: Sequence[str],
    *,
    cwd: Path | str | None,
    env: Mapping[str, str],
    input_bytes: bytes | None,
    trusted: bool,
) -> subprocess.CompletedProcess[bytes]:
    """Run git in a process group of its own, its output captured, with a deadline (``timeout_s``).
    When the deadline passes, or this process is interrupted (^C does not reach the group: it has no
    terminal), the whole group (git, its helpers, ssh) is killed and reaped: nothing is left behind.
    ``subprocess.TimeoutExpired`` is raised for the caller to word (``_stopped``)."""
    limit = timeout_s(trusted=trusted)
    proc = subprocess.Popen(
        list(argv), cwd=cwd, env=dict(env), start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.PIPE if input_bytes is not None else subprocess.DEVNULL,
    )  # fmt: skip
    try:
        out, err = proc.communicate(input_bytes, timeout=limit)
    except BaseException:
        _kill_group(proc)
        raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def _stopped(what: str, exc: subprocess.TimeoutExpired, cwd: Path | str, suspect: str) -> ToolError:
    """The error of ``git WHAT`` stopped at its deadline (``_spawn``) in ``cwd``: ``suspect`` says what
    may have blocked it."""
    return ToolError(
        f"git {what} did not finish in {exc.timeout:g}s in {cwd} (stopped; {suspect}? {TIMEOUT_ENV} sets the limit)"
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``proc``'s process group, reap ``proc`` and close its pipes (without reading what a child
    that left the group may still hold open)."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def git_text(args: Sequence[str], cwd: Path | str | None = None, **kw: Any) -> str:
    """``run_git`` with stdout decoded (UTF-8, surrogateescape) and stripped."""
    out: bytes = run_git(args, cwd, **kw).stdout
    return out.decode("utf-8", "surrogateescape").strip()


# ---- reading a checkout -------------------------------------------------------------------------


def is_git_checkout(path: Path) -> bool:
    """True when ``path`` is the top of a git work tree (``.git`` dir or gitfile present). A ``.git``
    that git cannot use (corrupt, or owned by another user: ``safe.directory``) raises ToolError."""
    if not (Path(path) / ".git").exists():
        return False
    top = git_text(["rev-parse", "--show-toplevel"], path)  # .git present but unusable: ToolError says why
    return Path(top).resolve() == Path(path).resolve()


def toplevel(path: Path) -> Path | None:
    """The top of the git work tree ``path`` is in; None when it is in none (or git cannot use it)."""
    proc = run_git(["rev-parse", "--show-toplevel"], path, check=False)
    top = proc.stdout.decode("utf-8", "surrogateescape").strip()
    return Path(top) if proc.returncode == 0 and top else None


def head_commit(path: Path) -> str | None:
    """The full SHA of HEAD, or None when there is no commit (or no repository)."""
    proc = run_git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], path, check=False)
    sha = proc.stdout.decode().strip()
    return sha if proc.returncode == 0 and SHA_RE.fullmatch(sha) else None


def has_commit(path: Path, sha: str) -> bool:
    return run_git(["cat-file", "-e", f"{sha}^{{commit}}"], path, check=False).returncode == 0


def git_path(path: Path, name: str) -> Path:
    """A path inside the repository's git dir (``git rev-parse --git-path``), absolute."""
    rel = git_text(["rev-parse", "--git-path", name], path)
    return (Path(path) / rel).resolve()


# ---- content, read without the index (flags, assume-unchanged, skip-worktree cannot hide a change) --


def object_format(path: Path) -> str:
    """``sha1`` or ``sha256``: the hash the repository names objects with."""
    fmt = git_text(["rev-parse", "--show-object-format"], path, check=False)
    return fmt if fmt in ("sha1", "sha256") else "sha1"


def tree_entries(path: Path, rev: str) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """``rev``'s tree in one read (replace refs and grafts off): (path -> (mode, blob id) of every
    file and symlink, path -> commit of every submodule, i.e. gitlink)."""
    raw = run_git(["ls-tree", "-r", "-z", "--full-tree", rev], path).stdout
    files: dict[str, tuple[str, str]] = {}
    links: dict[str, str] = {}
    for entry in raw.split(b"\0"):
        if not entry:
            continue
        meta, name = entry.split(b"\t", 1)
        mode, kind, oid = meta.decode().split()
        if kind == "blob":
            files[os.fsdecode(name)] = (mode, oid)
        elif kind == "commit":
            links[os.fsdecode(name)] = oid
    return files, links


def tree_files(path: Path, rev: str) -> dict[str, tuple[str, str]]:
    """Every file of ``rev``'s tree: path -> (mode, object id); submodules left out."""
    return tree_entries(path, rev)[0]


def blob_id(data: bytes, fmt: str = "sha1") -> str:
    """The object id git gives ``data`` as a blob (what ``git hash-object --no-filters`` prints)."""
    return hashlib.new(fmt, b"blob %d\0" % len(data) + data).hexdigest()


def worktree_entry(file: Path, fmt: str = "sha1") -> tuple[str, str] | None:
    """(mode, blob id) of a file in the work tree, as ``tree_files`` would record it; None when it is
    missing or not a file or symlink. Read raw (no filters), never through a symlink."""
    try:
        st = os.lstat(file)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(st.st_mode):
        return SYMLINK_MODE, blob_id(os.fsencode(os.readlink(file)), fmt)  # noqa: PTH115 (Path normalises './a//b')
    if not stat.S_ISREG(st.st_mode):
        return None
    fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read()
    return ("100755" if st.st_mode & 0o111 else "100644"), blob_id(data, fmt)


def show_file(path: Path, rel: str, rev: str = "HEAD") -> bytes | None:
    """The bytes of ``rel`` at ``rev`` as checkout would write them (smudge/eol filters applied);
    None when the path does not exist at ``rev``."""
    proc = run_git(["cat-file", "--filters", f"{rev}:{rel}"], path, check=False)
    return proc.stdout if proc.returncode == 0 else None


def file_mode(path: Path, rel: str, rev: str = "HEAD") -> str | None:
    """The git mode (``100644``, ``100755``, ``120000``, ``160000``) of ``rel`` at ``rev``."""
    out = run_git(["ls-tree", "-z", rev, "--", rel], path).stdout.split(b"\0")[0]
    return out.split(b" ", 1)[0].decode() if out else None


def gitlinks(path: Path, rev: str = "HEAD") -> dict[str, str]:
    """Submodule path -> pinned commit, read from the tree at ``rev`` (not from .gitmodules)."""
    return tree_entries(path, rev)[1]


def submodule_status(path: Path, *, prefix: str = "") -> tuple[SubmoduleState, ...]:
    """Every submodule, recursively, with the commit pinned by its superproject and the one checked out."""
    if head_commit(path) is None:
        return ()
    out: list[SubmoduleState] = []
    for rel, expected in sorted(gitlinks(path).items()):
        sub = Path(path) / rel
        actual = _submodule_head(sub)
        out.append(SubmoduleState(path=f"{prefix}{rel}", expected=expected, actual=actual))
        if actual is not None:
            out.extend(submodule_status(sub, prefix=f"{prefix}{rel}/"))
    return tuple(out)


def _submodule_head(sub: Path) -> str | None:
    """HEAD of the submodule checkout at ``sub``; None when it is not a work tree of its own: no
    ``.git``, or one git cannot use (git would answer for the superproject around it). One git call."""
    if not (sub / ".git").exists():
        return None
    proc = run_git(["rev-parse", "--show-toplevel", "--verify", "--quiet", "HEAD^{commit}"], sub, check=False)
    lines = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
    if proc.returncode != 0 or len(lines) != 2 or not SHA_RE.fullmatch(lines[1]):
        return None
    return lines[1] if Path(lines[0]).resolve() == Path(sub).resolve() else None


def remote_urls(path: Path) -> dict[str, str]:
    """Remote name -> fetch URL, credentials stripped: from the repository's own config file only
    (``--local``, includes not followed), so what a cache keys on (that file) is all it depends on."""
    proc = run_git(["config", "--local", "--no-includes", "--get-regexp", r"^remote\..*\.url$"], path, check=False)
    out: dict[str, str] = {}
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        key, _, url = line.partition(" ")
        out[key[len("remote.") : -len(".url")]] = strip_url_credentials(url)
    return dict(sorted(out.items()))


def is_local_url(url: str) -> bool:
    """file:// URLs (any case) and plain paths (where git's file protocol is the user's own choice)."""
    return url.lower().startswith("file://") or (not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", url) and ":" not in url)


def url_problem(url: str, *, allow_local: bool = True) -> str | None:
    """Why git must not be given ``url`` (None: it may). Refused: a leading ``-`` (git would read an
    option: CVE-2018-17456), control characters, ``<helper>::`` remote helpers (``ext::`` runs a
    command, ``fd::`` reads a descriptor), schemes outside ``URL_SCHEMES``, an ssh host that starts
    with ``-`` (``ssh://-oProxyCommand=...``) and, unless ``allow_local``, a local path or file URL."""
    checks = (
        (not url, "is empty"),
        (url.startswith("-"), "starts with '-' (git would read it as an option)"),
        (not url.isprintable(), "holds a control character"),
        (bool(_HELPER.match(url)), "names a git remote helper ('<transport>::'), which runs a program"),
    )
    problem = next((why for bad, why in checks if bad), None)
    if problem or (m := _SCHEME.match(url)) is None:
        return problem or _scp_or_path_problem(url, allow_local=allow_local)
    scheme = m.group(1).lower()
    if scheme not in URL_SCHEMES:
        return f"uses the scheme {scheme}://, not one of {', '.join(URL_SCHEMES)}"
    if scheme == "file":
        return None if allow_local else "is a local file URL, which only a local superproject may name"
    return _host_problem(url[m.end() :].split("/", 1)[0].rpartition("@")[2])


def _scp_or_path_problem(url: str, *, allow_local: bool) -> str | None:
    colon, slash = url.find(":"), url.find("/")
    if colon > 0 and (slash == -1 or colon < slash):  # scp-like [user@]host:path, an ssh URL to git
        return _host_problem(url[:colon].rpartition("@")[2])
    return None if allow_local else "is a local path, which only a local superproject may name"


def _host_problem(host: str) -> str | None:
    if not host.strip("[]"):
        return "has no host"
    if host.lstrip("[").startswith("-"):
        return "has a host that starts with '-' (ssh would read it as an option)"
    return None


def check_url(url: str, *, what: str = "URL", allow_local: bool = True) -> str:
    """``url`` when git may be given it (``url_problem``); else a one-line RefusedError."""
    problem = url_problem(url, allow_local=allow_local)
    if problem:
        raise RefusedError(one_line(f"{what} {strip_url_credentials(url)!r} {problem}: refusing to pass it to git"))
    return url


def check_submodule_url(url: str, *, local_superproject: bool, what: str) -> str:
    """The one rule for a URL a superproject's ``.gitmodules`` names (the submodule update, a source
    mirror, a checkout with ``unobtainable`` paths): ``check_url``, and a local path or ``file://`` URL
    only when the superproject itself was fetched from a local one (a remote superproject must not pull
    a repository of this machine into the checkout). A relative URL (``./x``, ``../x``) follows the
    superproject's: it is checked again once resolved."""
    relative = url.startswith(("./", "../"))
    return check_url(url, what=what, allow_local=local_superproject or relative)


def check_sha(sha: str) -> str:
    if not SHA_RE.fullmatch(sha):
        raise RefusedError(one_line(f"{sha!r} is not a 40-hex commit SHA: refusing to pass it to git"))
    return sha


# ---- making a checkout --------------------------------------------------------------------------


def init(path: Path) -> None:
    Path(path).mkdir(parents=True, exist_ok=True)
    run_git(["init", "--quiet", "--", str(path)], trusted=True)


def set_remote(path: Path, name: str, url: str) -> None:
    check_url(url, what=f"remote {name}")
    if name in remote_urls(path):
        run_git(["remote", "set-url", "--", name, url], path, trusted=True)
    else:
        run_git(["remote", "add", "--", name, url], path, trusted=True)


def fetch_commit(path: Path, url: str, sha: str, *, config: Mapping[str, str] | None = None) -> bool:
    """Fetch ``sha`` by SHA, shallow (``--depth 1``) where the server allows; else fetch every branch
    and tag and look for it. Returns True when the fetch was shallow. Raises ToolError if not found.
    ``config``: extra ``-c`` settings, e.g. ``url.<mirror>.insteadOf`` rewrites (never written to a file)."""
    check_url(url)
    check_sha(sha)
    cfg = {**_file_protocol(url), **(config or {})}
    proc = run_git(
        ["fetch", "--quiet", "--depth", "1", "--no-tags", "--", url, sha], path, check=False, config=cfg, trusted=True
    )
    if proc.returncode == 0 and has_commit(path, sha):
        return True
    refused = strip_url_credentials(proc.stderr.decode(errors="replace").strip())
    log.debug("shallow fetch by SHA refused (%s); fetching all refs", refused)
    refspecs = ["+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"]
    unshallow = ["--unshallow"] if git_path(path, "shallow").exists() else []
    run_git(["fetch", "--quiet", *unshallow, "--", url, *refspecs], path, config=cfg, trusted=True)
    if not has_commit(path, sha):
        raise ToolError(f"commit {sha} is not reachable from any branch or tag of {strip_url_credentials(url)}")
    return False


def checkout_detached(path: Path, sha: str) -> None:
    check_sha(sha)
    run_git(["-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", sha], path, trusted=True)


def submodule_update(path: Path, *, allow_file_protocol: bool = False, config: Mapping[str, str] | None = None) -> None:
    """``git submodule update --init --recursive`` at the commits the superproject pins; shallow first.
    ``config`` reaches the clones and fetches git runs for each submodule (``-c`` is inherited)."""
    for rel, url in sorted(gitmodules_urls(path, "HEAD").items()):
        check_submodule_url(url, local_superproject=allow_file_protocol, what=f".gitmodules: submodule {rel}: url")
    cfg = {**({"protocol.file.allow": "always"} if allow_file_protocol else {}), **(config or {})}
    base = ["submodule", "update", "--init", "--recursive", "--checkout", "--quiet"]
    proc = run_git([*base, "--depth", "1"], path, check=False, config=cfg, trusted=True)
    if proc.returncode != 0:
        log.debug("shallow submodule update failed; retrying with full history")
        run_git(base, path, config=cfg, trusted=True)


def gitmodules_urls(path: Path, rev: str) -> dict[str, str]:
    """Submodule path -> URL as ``.gitmodules`` at ``rev`` says (git config syntax, read by git)."""
    argv = ["config", "-z", "--blob", f"{rev}:.gitmodules", "--get-regexp", r"^submodule\..*\.(path|url)$"]
    proc = run_git(argv, path, check=False)
    names: dict[str, dict[str, str]] = {}
    for entry in proc.stdout.decode("utf-8", "surrogateescape").split("\0"):
        key, _, value = entry.partition("\n")  # -z: a value may hold a newline
        name, _, attr = key[len("submodule.") :].rpartition(".")
        names.setdefault(name, {})[attr] = value
    return {v["path"]: v["url"] for v in names.values() if "path" in v and "url" in v}


def _file_protocol(url: str) -> dict[str, str]:
    return {"protocol.file.allow": "always"} if is_local_url(url) else {}


def add_exclude(path: Path, pattern: str) -> bool:
    """Append ``pattern`` to ``.git/info/exclude`` (once). Returns True when it was added."""
    exclude = git_path(path, "info/exclude")
    text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    if pattern in text.splitlines():
        return False
    exclude.parent.mkdir(parents=True, exist_ok=True)
    with open(exclude, "a", encoding="utf-8") as fh:
        fh.write(("\n" if text and not text.endswith("\n") else "") + pattern + "\n")
    return True


# ---- re-creating a captured working tree --------------------------------------------------------


def apply_patch(path: Path, patch: bytes, *, exclude: Sequence[str] = ()) -> None:
    """Apply a ``git diff HEAD --binary`` patch to the working tree and the index of ``path``:
    binary hunks, modes, creations and deletions included; a file the patch creates is tracked again,
    as it was (``git diff HEAD`` showed it). ``exclude`` leaves paths (submodules) out. git refuses
    paths outside the tree and paths behind a symbolic link."""
    if not patch:
        return
    args = ["apply", "--index", "--binary", "--whitespace=nowarn", *(f"--exclude={p}" for p in exclude), "-"]
    run_git(args, path, input_bytes=patch)


def commit_time(path: Path, rev: str = "HEAD") -> int:
    """The committer time of ``rev`` in seconds since the epoch (``SOURCE_DATE_EPOCH`` for a build)."""
    return int(git_text(["show", "-s", "--format=%ct", rev], path))
