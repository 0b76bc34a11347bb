"""The gate's pull-request comment and ``lock diff --format markdown`` under hostile inputs: a corpus of
markup payloads (tests/payloads.py) in every field a pull request controls (the acknowledgement file's
reason, package pattern, target, platform and version; lock markers, index URLs, VCS URLs, artifact
file names, lock file names; the base ref), rendered through a real CommonMark/GFM parser
(markdown-it-py with tables, strikethrough and linkify, which stands for GitHub's autolinks).

No link, image, HTML, emphasis, strikethrough, heading or mention may come from an input: every
payload lands in a code span (where GitHub also makes no @mention, #ref or emoji), or is left out.
Credentials in URLs reach no format. A gb10/cloud-sized diff stays under the comment cap."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import unicodedata
import urllib.parse
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from megacpp_env.chars import dangerous_char
from megacpp_env.cli import main
from megacpp_env.lock.gate import run_gate
from megacpp_env.lock.pylock import Artifact, Lock, LockedPackage, LockMeta, Vcs, render_pylock
from megacpp_env.spec import load_spec
from tests.fixtures.index import write_lock_spec
from tests.payloads import MARKUP_PAYLOADS, SECRET

MARKER = "<!-- megacpp-env-lock-gate -->"
CAP = 50_000  # lock.comment.COMMENT_CAP, bytes
GFM = MarkdownIt("gfm-like")  # CommonMark + tables + strikethrough + linkify (bare URLs, www., emails)
FORBIDDEN = {"link_open", "image", "html_inline", "em_open", "strong_open", "s_open", "hr", "blockquote_open",
             "footnote_ref", "math_inline", "math_block"}  # fmt: skip
# Every word the renderer writes itself: no `@`, `#`, `_`, `*`, `<`, `[`, `&`, `~`, `$`, backtick or URL.
OWN_TEXT = re.compile(r"[A-Za-z0-9 ,.:;()'/=+\-…]*")
OUR_HTML = re.compile(r"<!-- megacpp-env-lock-gate(: nothing to report)? -->|</details>|"
                      r"<details><summary>[A-Za-z0-9 :()\-]+</summary>")  # fmt: skip


def git(repo, *args):
    config = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", *config, *args], cwd=repo, check=True, capture_output=True)


def archive(payload, sha):
    """A direct-URL archive whose file name is the payload (PEP 751 checks a wheel's name, not this)."""
    return Artifact(kind="archive", url=f"https://files.example/f/{urllib.parse.quote(payload, safe='')}.tar.gz",
                    sha256=sha)  # fmt: skip


def quoted_marker(payload):
    q = "'" if "'" not in payload else '"'
    return f"extra == {q}{payload}{q}"


def marker_ok(payload):
    from packaging.markers import InvalidMarker, Marker

    if dangerous_char(payload) is not None:  # the readers refuse it (records.Table.text)
        return False
    try:
        Marker(quoted_marker(payload))
    except InvalidMarker:
        return False
    return True


def packages(side):
    """One package per payload with its payload in the artifact file name (a re-upload), the marker,
    the index URL and a VCS URL, where the format allows it."""
    out = []
    for i, p in enumerate(MARKUP_PAYLOADS):
        urlsafe = not any(c.isspace() for c in p) and p.isprintable()
        out.append(LockedPackage(
            name=f"p{i}", version="1.0", artifacts=(archive(p, ("a" if side == "base" else "b") * 64),),
            index=f"https://idx.example/{p}/simple" if side == "head" and urlsafe else "https://files.example/simple",
            marker=quoted_marker(p) if side == "head" and marker_ok(p) else "",
        ))  # fmt: skip
        if urlsafe:
            out.append(LockedPackage(name=f"v{i}", version="", vcs=Vcs(
                type="git", url=f"https://git.example/{p}", commit=("1" if side == "base" else "2") * 40)))  # fmt: skip
    return out


def write_lock(path, pkgs):
    meta = LockMeta(target="smoke", platform="linux/amd64", python="3.13")
    path.write_text(render_pylock(Lock(packages=tuple(pkgs), meta=meta)))


FILE_NAME_PAYLOADS = [p for p in MARKUP_PAYLOADS if "/" not in p and "\x00" not in p and len(p) < 200]
BASE_REF = "x`PWN`<b>|@y&#64;"
# The ack file's reader refuses control and format characters (records.Table.text): those payloads
# reach a report through the lock fields that allow them (an artifact's file name, percent-decoded).
ACK_PAYLOADS = [p for p in MARKUP_PAYLOADS if dangerous_char(p) is None]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A repository whose base commit has clean locks and whose working tree has every payload."""
    repo = tmp_path_factory.mktemp("hostile") / "repo"
    spec = write_lock_spec(repo, "http://127.0.0.1:9/simple")
    locks = repo / "locks"
    locks.mkdir()
    write_lock(locks / "pylock.smoke-linux-amd64.toml", packages("base"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "branch", BASE_REF)
    write_lock(locks / "pylock.smoke-linux-amd64.toml", packages("head"))
    for i, p in enumerate(FILE_NAME_PAYLOADS[:12]):
        write_lock(locks / f"pylock.{p}{i}-linux-amd64.toml", [])
    acks = [{"package": f"p{i}", "change": "hashes-changed", "reason": p}
            for i, p in enumerate(MARKUP_PAYLOADS) if p in ACK_PAYLOADS]  # fmt: skip
    acks += [{"package": f"{p}*", "change": "upgraded", "reason": "r", "target": p, "platform": p, "version": p}
             for p in ACK_PAYLOADS]  # fmt: skip
    body = "".join("[[ack]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in a.items()) + "\n" for a in acks)
    (locks / "ACKNOWLEDGED.toml").write_text(body)
    return spec


def tokens(markdown):
    out = []
    for t in GFM.parse(markdown):
        out.append(t)
        out += t.children or []
    return out


def assert_no_markup_from_inputs(markdown):
    """The GFM parse of ``markdown`` holds no node an input could have made; returns the code spans."""
    toks = tokens(markdown)
    assert not [t for t in toks if t.type in FORBIDDEN], [(t.type, t.content) for t in toks if t.type in FORBIDDEN]
    for t in toks:
        if t.type == "text":
            assert OWN_TEXT.fullmatch(t.content), t.content
        elif t.type == "html_block":
            assert all(OUR_HTML.fullmatch(line) for line in t.content.strip().splitlines()), t.content
        elif t.type == "heading_open":
            assert t.tag in ("h2", "h3", "h4"), t
    heads = [i for i, t in enumerate(toks) if t.type == "heading_open" and t.tag == "h2"]
    assert len(heads) == 1  # one verdict heading: the renderer's
    assert all(t.type in ("text", "code_inline", "softbreak", "inline") or t.nesting or t.type.endswith(
        ("_open", "_close")) or t.type in ("html_block", "fence", "code_block") for t in toks)  # fmt: skip
    for ch in markdown:
        assert ch == "\n" or not unicodedata.category(ch).startswith(("C", "Z")) or ch == " ", hex(ord(ch))
    assert SECRET not in markdown
    _cells_match_headers(GFM.parse(markdown))
    return [t.content for t in toks if t.type == "code_inline"]


def _cells_match_headers(block_tokens):
    header, count = 0, 0
    for t in block_tokens:
        if t.type == "thead_open":
            header, count = -1, 0
        elif t.type in ("th_open", "td_open"):
            count += 1
        elif t.type == "tr_close":
            header = count if header == -1 else header
            assert count == header, "a row with another number of cells than its header"
            count = 0
        elif t.type == "thead_close":
            header = header if header != -1 else count


def test_every_payload_in_every_field_stays_a_code_span(hostile):
    from megacpp_env.lock import comment
    from megacpp_env.lock.escape import plain

    report = run_gate(load_spec(hostile), "main")
    assert len(report.verdict.acknowledged) == len(ACK_PAYLOADS)
    assert len(report.verdict.unused) == len(ACK_PAYLOADS)
    assert all(x.unchanged >= 0 for x in report.diffs)  # a name with two changes was counted twice
    markdown = comment.render_comment(report, base=BASE_REF, cap=10**8)
    spans = assert_no_markup_from_inputs(markdown)
    for p in ACK_PAYLOADS:  # each reason, whole (up to the value limit), as one code span
        shown = plain(p)
        assert any(s == shown or (len(shown) > 300 and s == shown[:299] + "…") for s in spans), p
    pwn_outside = [t.content for t in tokens(markdown) if t.type == "text" and "PWN" in t.content]
    assert not pwn_outside


def test_the_gate_verb_writes_the_same_safe_comment_within_the_cap(hostile, capsys):
    rc = main(["gate", "--base", BASE_REF, "--spec", str(hostile), "--format", "markdown"])
    out, err = capsys.readouterr()
    assert rc == 1, err  # the index moves and re-uploads no ack covers
    assert len(out.encode()) <= CAP
    assert out.startswith(MARKER + "\n## megacpp-env lock gate: ")
    assert_no_markup_from_inputs(out)
    assert "Left out to fit a comment" in out or len(out.encode()) < CAP - 1000


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_text_and_json_hold_no_credentials_and_no_raw_controls(hostile, capsys, fmt):
    rc = main(["gate", "--base", "main", "--spec", str(hostile), "--format", fmt])
    out = capsys.readouterr().out
    assert rc in (0, 1)
    assert SECRET not in out
    assert "evil.example/PWN" in out  # the URL itself is still shown, without its userinfo
    if fmt == "json":
        json.loads(out)
        assert out.isascii()
    else:
        assert not [c for c in out if c != "\n" and unicodedata.category(c)[0] in "CZ" and c != " "]
        assert "\\u202e" in out and "\\x1b" in out  # shown as escapes, in their place


def test_lock_diff_markdown_escapes_lock_fields(hostile, tmp_path, capsys):
    old = tmp_path / "pylock.old.toml"
    write_lock(old, packages("base"))
    new = hostile.parent / "locks" / "pylock.smoke-linux-amd64.toml"
    assert main(["lock", "diff", str(old), str(new), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    toks = tokens(out)
    assert not [t for t in toks if t.type in FORBIDDEN]
    assert all(OWN_TEXT.fullmatch(t.content) for t in toks if t.type == "text"), [
        t.content for t in toks if t.type == "text" and not OWN_TEXT.fullmatch(t.content)
    ]
    assert SECRET not in out
    _cells_match_headers(GFM.parse(out))


def test_userinfo_is_no_origin_change():
    """Credentials added to an artifact URL are not a new host, and are never shown."""
    from megacpp_env.lock import diff

    def lock(url):
        return Lock(packages=(LockedPackage(name="x", version="1.0", artifacts=(
            Artifact(kind="wheel", url=url, sha256="a" * 64),)),))  # fmt: skip

    d = diff.diff_locks(lock("https://h.example/x-1.0-py3-none-any.whl"),
                        lock(f"https://bob:{SECRET}@h.example/x-1.0-py3-none-any.whl"))  # fmt: skip
    assert d.changes == ()
    d = diff.diff_locks(lock("https://h.example/x-1.0-py3-none-any.whl"),
                        lock(f"https://bob:{SECRET}@other.example/x-1.0-py3-none-any.whl"))  # fmt: skip
    assert [c.kinds for c in d.changes] == [("index-changed",)]
    for fmt in ("text", "markdown", "json"):
        shown = diff.render([d], fmt)
        assert SECRET not in shown and "bob" not in shown and "other.example" in shown


# ---- errors and checks reach the comment -------------------------------------------------------------


def test_a_gate_error_is_a_comment_and_a_line_on_stderr(hostile, capsys, tmp_path):
    results = tmp_path / "checks"
    results.mkdir()
    (results / "check.rc").write_text("1\n")
    (results / "check.log").write_text("error: GB001 stack.yaml: `@PWN` <b>x</b>\n```\nend\n")
    (results / "render-check.rc").write_text("0\n")
    rc = main(["gate", "--base", "no-such-ref`<b>", "--spec", str(hostile), "--format", "markdown",
               "--check-results", str(results)])  # fmt: skip
    out, err = capsys.readouterr()
    assert rc == 1
    assert "unknown git ref" in err
    assert out.startswith(MARKER + "\n## megacpp-env lock gate: ERROR\n")
    spans = assert_no_markup_from_inputs(out)
    assert any("unknown git ref" in s for s in spans)
    assert "| `check` | failed (exit 1) |" in out and "| `render-check` | passed |" in out
    assert "<details><summary>Output of check (exit 1)</summary>" in out
    fence = [t for t in tokens(out) if t.type == "fence"]
    assert len(fence) == 1 and "error: GB001 stack.yaml: `@PWN` <b>x</b>" in fence[0].content
    assert "end" in fence[0].content  # the log's own ``` did not close the block


def test_a_clean_repository_is_quiet_unless_a_check_failed(tmp_path):
    from megacpp_env.lock import comment
    from megacpp_env.lock.checkresults import CheckResult

    repo = tmp_path / "repo"
    spec = write_lock_spec(repo, "http://127.0.0.1:9/simple")
    (repo / "locks").mkdir()
    write_lock(repo / "locks" / "pylock.smoke-linux-amd64.toml", packages("base"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    report = run_gate(load_spec(spec), "main")
    lines = comment.render_comment(report, base="main").splitlines()
    assert lines[:3] == [comment.MARKER, comment.QUIET, "## megacpp-env lock gate: PASS"]
    failed = (CheckResult(name="render-check", exit_code=1, log="stale"),)
    lines = comment.render_comment(report, base="main", checks=failed).splitlines()
    assert lines[:2] == [comment.MARKER, "## megacpp-env lock gate: FAIL"]


# ---- size: gb10 and cloud have no locks here, so locks of their size are made up ------------------

GB10_CLOUD = (("gb10", "linux/arm64"), ("cloud", "linux/amd64"))
BIG = 320  # packages per lock: the vLLM stack's closure with torch nightly, CUDA wheels and their deps


def big_lock(target, platform, side):
    """A lock of BIG packages with long, realistic names and several wheels each; on the head side every
    package moved (upgraded and re-built) and a tenth of them come from another index."""
    arch = "aarch64" if platform.endswith("arm64") else "x86_64"
    pkgs = []
    for i in range(BIG):
        name = f"nvidia-cusparse-lt-cu13-generated-package-{i:03d}"
        version = "13.2.0" if side == "base" else f"13.{3 + i % 5}.{i}"
        host = (
            "https://download.pytorch.org/whl/nightly/cu132"
            if side == "head" and i % 10 == 0
            else "https://pypi.org/simple"
        )
        wheels = tuple(
            Artifact(kind="wheel", sha256=hashlib.sha256(f"{name}{version}{py}{side}".encode()).hexdigest(),
                     url=f"https://files.example/p/{name.replace('-', '_')}-{version}-cp{py}-cp{py}-manylinux_2_28_{arch}.whl")
            for py in (311, 312, 313)
        )  # fmt: skip
        pkgs.append(LockedPackage(name=name, version=version, index=host, artifacts=wheels, direct=i % 7 == 0,
                                  marker=f"platform_machine == '{arch}' and python_version >= '3.11'"))  # fmt: skip
    return Lock(packages=tuple(pkgs), meta=LockMeta(target=target, platform=platform, python="3.13"))


@pytest.fixture(scope="module")
def big_repo(tmp_path_factory):
    """The shipped spec and locks, plus gb10/cloud locks (and their CUDA toolchain locks) of their real
    size, each of whose packages moved in the working tree."""
    root = Path(__file__).resolve().parents[1]
    repo = tmp_path_factory.mktemp("big") / "repo"
    repo.mkdir()
    (repo / "stack.yaml").write_text((root / "stack.yaml").read_text())
    locks = repo / "locks"
    locks.mkdir()
    for lock in (root / "locks").glob("pylock.*.toml"):
        (locks / lock.name).write_text(lock.read_text())
    names = [(t, p, f"pylock.{t}{part}-{p.replace('/', '-')}.toml") for t, p in GB10_CLOUD for part in ("", "-cuda")]
    for t, p, name in names:
        (locks / name).write_text(render_pylock(big_lock(t, p, "base")))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    for t, p, name in names:
        (locks / name).write_text(render_pylock(big_lock(t, p, "head")))
    return repo / "stack.yaml"


def test_a_gb10_cloud_sized_diff_fits_a_comment_summary_first(big_repo, capsys):
    rc = main(["gate", "--base", "main", "--spec", str(big_repo), "--format", "markdown"])
    out = capsys.readouterr().out
    assert rc == 1
    assert len(out.encode()) <= CAP
    assert_no_markup_from_inputs(out)
    lines = out.splitlines()
    summary = lines.index("| lock | changes | unchanged | violations | acknowledged |")
    first_details = next(i for i, line in enumerate(lines) if line.startswith("<details>"))
    assert summary < lines.index(next(x for x in lines if x.startswith("### Violations"))) < first_details
    rows = lines[summary + 2 : summary + 6]
    assert [r.split(" | ")[0] for r in rows] == [
        "| `cloud linux/amd64 (cuda toolchain)`", "| `cloud linux/amd64`", "| `gb10 linux/arm64 (cuda toolchain)`",
        "| `gb10 linux/arm64`",
    ]  # fmt: skip
    assert all(f"{BIG} upgraded" in r for r in rows)
    assert lines.count("</details>") == sum(x.startswith("<details>") for x in lines) == 1
    assert sum(x.startswith("| `nvidia-") for x in lines[first_details:]) >= 4 * 10  # every lock got rows
    left = next(x for x in lines if x.startswith("Left out to fit a comment: "))
    assert int(left.split(": ")[1].split(" ")[0]) > 0
    assert "`megacpp-env gate --base main`" in left


def test_the_uncapped_report_of_that_diff_is_what_the_cap_is_for(big_repo):
    """The measure behind COMMENT_CAP: the same report without a cap would be refused by GitHub."""
    from megacpp_env.lock import comment

    report = run_gate(load_spec(big_repo), "main")
    whole = comment.render_comment(report, base="main", cap=10**9)
    assert "Left out" not in whole
    assert len(whole.encode()) > 65_536 * 4


def test_the_cap_holds_whatever_the_values_hold(big_repo):
    """Four-byte characters in the base ref and the error, many failing checks with long logs: the
    comment still fits, and stays markup-free."""
    from megacpp_env.lock import comment
    from megacpp_env.lock.checkresults import CheckResult

    report = run_gate(load_spec(big_repo), "main")
    base = "\U0001f600`@PWN" * 3000
    checks = [CheckResult(name=f"check-{i}", exit_code=1, log=("\U0001f600 ``` PWN\n" * 5000)) for i in range(30)]
    for text in (comment.render_comment(report, base=base, checks=checks),
                 comment.render_comment(None, base=base, checks=checks, error="\U0001f600" * 100_000)):  # fmt: skip
        assert len(text.encode()) <= CAP
        assert_no_markup_from_inputs(text)
