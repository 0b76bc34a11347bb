"""The differential corpus: one hypothesis strategy per mutation class, each with its budget.

A ``Mutation`` is a list of ``setup`` steps (before the caches are warmed: index flags, ignore
sources, git settings) and ``change`` steps (after: what a warm snapshot must not miss), with
``drift``: whether the environment now differs from the golden (True), does not (False: only the
caches changed), or whether the product leaves that open (None). The corpus's oracle is the
differential one (warm answer == ``--no-cache`` answer); ``drift`` only checks that a mutation
has the teeth it claims (the cold answer sees it).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field

from hypothesis import strategies as st

from tests.differential.cachefiles import Bless, CacheOp
from tests.differential.steps import (
    AddFile,
    AddSpecial,
    Append,
    Chmod,
    EditBytes,
    GitKnob,
    HookShadow,
    IgnoreSource,
    IndexFlag,
    RecordRow,
    Remove,
    Replace,
    ShadowPth,
    Special,
    Stage,
    Step,
    UntrackedCache,
)
from tests.differential.world import IGNORE_PREFIX, World


@dataclass(frozen=True, kw_only=True, slots=True)
class Mutation:
    cls: str
    drift: bool | None
    setup: tuple[Step, ...] = ()
    change: tuple[Step, ...] = field(default_factory=tuple)
    golden_after_setup: bool = False  # this example's own golden, taken once its setup is warm

    def env(self, world: World) -> dict[str, str]:
        out: dict[str, str] = {}
        for step in (*self.setup, *self.change):
            out.update(step.env(world))
        return out

    def __str__(self) -> str:
        setup = f"setup [{'; '.join(map(repr, self.setup))}], " if self.setup else ""
        golden = "golden taken after the setup, " if self.golden_after_setup else ""
        return f"{self.cls}: {setup}{golden}change [{'; '.join(map(repr, self.change))}]"


OFFSETS = st.integers(0, 1 << 20)
XORS = st.integers(0, 254)
RESTORED = st.sampled_from([True, True, False])  # mostly the stealthy edit: mtime put back

# ---- distributions --------------------------------------------------------------------------------

RECORDED = (
    "site/alpha/core.py",
    "site/alpha/sub/deep.py",
    "site/alpha/_ext.so",
    "site/alpha/big.bin",
    "site/beta.py",
    "site/six.py",
    "site/hooked.py",
    "site/hooked.pth",
    "site/alpha-1.0.dist-info/METADATA",
    "venv/bin/alpha-cli",
)
CACHED_APART = ("site/alpha/core.py", "site/alpha/big.bin")  # a unit's cache file; the big files' own
DIST_INFOS = ("alpha-1.0.dist-info", "beta-2.0.dist-info")
STRAYS = (
    "site/evil.py",
    "site/evil.so",
    "site/alpha/evil.py",
    "site/alpha/sub/_evil.so",
    "site/evilpkg/__init__.py",
    "site/alpha-1.0.dist-info/extra.txt",
)


def _record_digest(data: bytes) -> bytes:
    return b"sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")


BETA = b"BETA = 2\n"
GOOD = _record_digest(BETA)
HOSTILE_ROWS: dict[str, bytes] = {
    "size-5000-digits": b"beta.py," + GOOD + b",1" + b"0" * 4999,
    "big-row-size-5000-digits": b"alpha/big.bin," + GOOD + b"," + b"9" * 5000,
    "nul-in-quoted-path": b'"be\x00ta.py",' + GOOD + b",9",
    "dotdot-path": b"../../../../../../etc/hostname," + GOOD + b",9",
    "dotdot-into-world": b"../../../../shadow/six.py," + GOOD + b",22",
    "absolute-path": b"/etc/hostname," + GOOD + b",9",
    "bad-hash": b"beta.py,sha256=" + b"A" * 43 + b",9",
    "unknown-algorithm": b"beta.py,md5=1B2M2Y8AsgTpgAmY7PhCfg,9",
    "hash-without-algorithm": b"beta.py," + GOOD[7:] + b",9",
    "one-field": b"beta.py",
    "extra-fields": b"beta.py," + GOOD + b",9,x,y",
    "negative-size": b"beta.py," + GOOD + b",-9",
    "size-not-a-number": b"beta.py," + GOOD + b",nine",
    "empty-path": b"," + GOOD + b",9",
    "newline-in-quoted-path": b'"beta\n.py",' + GOOD + b",9",
    "unbalanced-quote": b'"beta.py,' + GOOD + b",9",
    "path-5000-chars": b"a" * 5000 + b".py," + GOOD + b",9",
    "invalid-utf8-path": b"beta\xff.py," + GOOD + b",9",
    "duplicate-row-other-hash": b"beta.py," + _record_digest(b"BETA = 3\n") + b",9",
}
# The rows that turned the whole python section into an error before the fix (issue 28, defect 3).
GOLDEN_BLINDING_ROWS = ("size-5000-digits", "big-row-size-5000-digits", "nul-in-quoted-path")


def same_size_edit(target: str) -> st.SearchStrategy[Mutation]:
    def build(offset: int, xor: int, restore: bool) -> Mutation:
        step = EditBytes(target=target, offset=offset, xor=xor, restore_mtime=restore)
        return Mutation(cls="dist.same-size-edit", drift=True, change=(step,))

    return st.builds(build, OFFSETS, XORS, RESTORED)


def pth_hook(target: str, label: str) -> st.SearchStrategy[Mutation]:
    def build(restore: bool) -> Mutation:
        step = HookShadow(target=target, restore_mtime=restore)
        return Mutation(cls=f"dist.pth-hook[{label}]", drift=True, change=(step,))

    return st.builds(build, st.booleans())


def pth_line(target: str) -> st.SearchStrategy[Mutation]:
    def build(restore: bool) -> Mutation:
        return Mutation(cls="dist.pth-line", drift=True, change=(ShadowPth(target=target, restore_mtime=restore),))

    return st.builds(build, RESTORED)


def pyvenv_cfg() -> st.SearchStrategy[Mutation]:
    """``include-system-site-packages = false`` -> ``true`` (same size): the base's site-packages join sys.path."""

    def build(restore: bool) -> Mutation:
        old, new = "include-system-site-packages = false", "include-system-site-packages = true "
        step = Replace(target="venv/pyvenv.cfg", old=old, new=new, restore_mtime=restore)
        return Mutation(cls="dist.pyvenv-cfg", drift=True, change=(step,))

    return st.builds(build, st.booleans())


def metadata_version() -> st.SearchStrategy[Mutation]:
    def build(dist: str, restore: bool) -> Mutation:
        version = dist.removesuffix(".dist-info").split("-")[1]
        new = version[:-1] + str((int(version[-1]) + 1) % 10)
        target = f"site/{dist}/METADATA"
        step = Replace(target=target, old=f"Version: {version}", new=f"Version: {new}", restore_mtime=restore)
        return Mutation(cls="dist.metadata-version", drift=True, change=(step,))

    return st.builds(build, st.sampled_from(DIST_INFOS), RESTORED)


def record_row(name: str) -> st.SearchStrategy[Mutation]:
    def build(dist_info: str, replace_first: bool, restore: bool) -> Mutation:
        step = RecordRow(
            dist_info=dist_info, name=name, row=HOSTILE_ROWS[name], replace_first=replace_first, restore_mtime=restore
        )
        return Mutation(cls=f"dist.record-row[{name}]", drift=True, change=(step,))

    return st.builds(build, st.sampled_from(DIST_INFOS), st.booleans(), RESTORED)


def record_row_in_golden(name: str) -> st.SearchStrategy[Mutation]:
    """A hostile row in alpha's or beta's RECORD already when the golden was taken; then a file of
    another distribution edited. One bad row must not blind the check to the rest."""

    def build(dist_info: str, target: str, offset: int, xor: int) -> Mutation:
        row = RecordRow(
            dist_info=dist_info, name=name, row=HOSTILE_ROWS[name], replace_first=False, restore_mtime=False
        )
        edit = EditBytes(target=target, offset=offset, xor=xor, restore_mtime=True)
        return Mutation(
            cls="dist.record-row-in-golden", drift=True, setup=(row,), change=(edit,), golden_after_setup=True
        )

    others = st.sampled_from(["site/six.py", "site/hooked.py"])
    return st.builds(build, st.sampled_from(DIST_INFOS), others, OFFSETS, XORS)


def record_special(kind: str) -> st.SearchStrategy[Mutation]:
    def build(dist: str) -> Mutation:
        step = Special(target=f"site/{dist}/RECORD", kind=kind)
        return Mutation(cls=f"dist.record-special[{kind}]", drift=True, change=(step,))

    return st.builds(build, st.sampled_from(DIST_INFOS))


def stray() -> st.SearchStrategy[Mutation]:
    def build(target: str, restore: bool) -> Mutation:
        drift = None if ".dist-info/" in target else True
        step = AddFile(target=target, content="import os\n", restore_dir_mtime=restore)
        return Mutation(cls="dist.stray", drift=drift, change=(step,))

    return st.builds(build, st.sampled_from(STRAYS), st.booleans())


def removed() -> st.SearchStrategy[Mutation]:
    return st.builds(
        lambda t: Mutation(cls="dist.remove", drift=True, change=(Remove(target=t),)), st.sampled_from(RECORDED)
    )


# ---- checkouts ------------------------------------------------------------------------------------

TRACKED_FILES = ("train.py", "model/layer.py", "ex_tracked.so")
FLAGS = ("none", "assume-unchanged", "skip-worktree")
EDITS = ("same-size-mtime-restored", "same-size", "append", "remove", "chmod")
SOURCES = (
    "none", "info-exclude", "gitignore", "untracked-gitignore", "home-gitconfig", "xdg-config",
    "default-global-ignore", "git-config-global", "git-config-system", "local-config", "env-config",
)  # fmt: skip
TEMPLATE_SOURCES = ("none", "info-exclude", "gitignore")  # on in every world already
KNOBS: dict[str, tuple[str, str]] = {
    "trustctime": ("core.trustctime", "false"),
    "checkStat": ("core.checkStat", "minimal"),
    "ignoreStat": ("core.ignoreStat", "true"),
    "fileMode": ("core.fileMode", "false"),
    "showUntrackedFiles": ("status.showUntrackedFiles", "no"),
}
KNOB_CHANGES = ("same-size-mtime-restored", "chmod", "untracked-dir-mtime-restored")


def tracked_edit(file: str, how: str, offset: int, xor: int) -> tuple[Step, bool | None]:
    """The step editing a tracked file, and whether that is drift (a mode change: left open)."""
    target = f"co/{file}"
    steps: dict[str, Step] = {
        "same-size-mtime-restored": EditBytes(target=target, offset=offset, xor=xor, restore_mtime=True),
        "same-size": EditBytes(target=target, offset=offset, xor=xor, restore_mtime=False),
        "append": Append(target=target, content="print('EVIL')\n"),
        "remove": Remove(target=target),
        "chmod": Chmod(target=target, mode=0o755),
    }
    return steps[how], (None if how == "chmod" else True)


def tracked(flag: str, how: str) -> st.SearchStrategy[Mutation]:
    @st.composite
    def build(draw: st.DrawFn) -> Mutation:
        file = draw(st.sampled_from(TRACKED_FILES))
        step, drift = tracked_edit(file, how, draw(OFFSETS), draw(XORS))
        stage = how != "remove" and draw(st.booleans())
        setup = () if flag == "none" else (IndexFlag(file=file, flag=flag),)
        change = (step, Stage(file=file)) if stage else (step,)
        return Mutation(cls=f"checkout.tracked[{flag}]", drift=drift, setup=setup, change=change)

    return build()


def untracked(source: str) -> st.SearchStrategy[Mutation]:
    prefix = "hid/" if source == "untracked-gitignore" else IGNORE_PREFIX.get(source, "")

    def build(name: str, suffix: str, where: str, restore: bool) -> Mutation:
        where = "" if source == "untracked-gitignore" else where
        step = AddFile(target=f"co/{where}{prefix}{name}{suffix}", content="import os\n", restore_dir_mtime=restore)
        setup = () if source in TEMPLATE_SOURCES else (IgnoreSource(source=source),)
        drift = None if source == "gitignore" else True
        return Mutation(cls=f"checkout.untracked[{source}]", drift=drift, setup=setup, change=(step,))

    names, suffixes = st.sampled_from(["evil", "_C", "hook"]), st.sampled_from([".so", ".pth", ".py"])
    return st.builds(build, names, suffixes, st.sampled_from(["", "model/"]), st.booleans())


def untracked_special(kind: str) -> st.SearchStrategy[Mutation]:
    """A new FIFO or socket in the checkout, beside the tracked files or in a directory of them."""

    def build(where: str, restore: bool) -> Mutation:
        step = AddSpecial(target=f"co/{where}new.{kind}", kind=kind, restore_dir_mtime=restore)
        return Mutation(cls=f"checkout.untracked-special[{kind}]", drift=True, change=(step,))

    return st.builds(build, st.sampled_from(["", "model/"]), st.booleans())


def untracked_edit(file: str) -> st.SearchStrategy[Mutation]:
    """An untracked file the golden saw (one hidden by .git/info/exclude, one not), edited in place."""

    def build(offset: int, xor: int, restore: bool) -> Mutation:
        step = EditBytes(target=f"co/{file}", offset=offset, xor=xor, restore_mtime=restore)
        return Mutation(cls="checkout.untracked-edit", drift=True, change=(step,))

    return st.builds(build, OFFSETS, XORS, RESTORED)


def knob(name: str, change: str) -> st.SearchStrategy[Mutation]:
    @st.composite
    def build(draw: st.DrawFn) -> Mutation:
        if name == "untrackedCache":
            setup: tuple[Step, ...] = (UntrackedCache(),)
        else:
            key, value = KNOBS[name]
            setup = (GitKnob(key=key, value=value, where=draw(st.sampled_from(["local-config", "git-config-system"]))),)
        if change == "untracked-dir-mtime-restored":
            target = f"co/model/evil{draw(st.sampled_from(['.so', '.pth']))}"
            step: Step = AddFile(target=target, content="import os\n", restore_dir_mtime=True)
            drift: bool | None = True
        else:
            step, drift = tracked_edit(draw(st.sampled_from(TRACKED_FILES)), change, draw(OFFSETS), draw(XORS))
        return Mutation(cls=f"checkout.knob[{name}]", drift=drift, setup=setup, change=(step,))

    return build()


# ---- the caches ---------------------------------------------------------------------------------

BLESS_TARGETS = (
    "site/alpha/core.py", "site/alpha/big.bin", "site/beta.py", "site/beta-2.0.dist-info/RECORD",
    "site/alpha-1.0.dist-info/RECORD",
)  # fmt: skip


def cache_op(op: str, kinds: st.SearchStrategy[int]) -> st.SearchStrategy[Mutation]:
    """``op`` on an entry of the ``kind``-th kind of cache entry (``CacheOp``), which one drawn."""

    def build(kind: int, arg: int) -> Mutation:
        return Mutation(cls=f"cache.{op}", drift=False, change=(CacheOp(op=op, kind=kind, arg=arg),))

    return st.builds(build, kinds, st.integers(0, 1 << 20))


def bless(how: str, target: str) -> st.SearchStrategy[Mutation]:
    def build(offset: int, xor: int) -> Mutation:
        step = Bless(target=target, offset=offset, xor=xor, how=how)
        return Mutation(cls=f"cache.bless-{how}", drift=True, change=(step,))

    return st.builds(build, OFFSETS, XORS)
