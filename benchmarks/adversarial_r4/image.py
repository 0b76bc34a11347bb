"""Issue 31, round 4, image area (defects 1 and 2): `verify-image` against hostile image answers, and
`sbom --output` to targets that cannot take it.

    python -m benchmarks.adversarial_r4.image      prints the counts as JSON

Classes:
  answers   a docker CLI (``$MEGACPP_DOCKER``, a real executable) answering as a hostile image would:
            its listing not JSON, a list, nested 100,000 deep, rows of other shapes or types, control
            characters; its baked SBOM with names, versions, purls, externalReferences and hashes of
            every other JSON type; its labels and its diff not JSON objects; an image that never exits
            or floods its output. Exit 0 is a false ok (a control answer must pass), exit 3 a traceback,
            an escape character reaching the terminal an escape.
  outputs   `sbom smoke --output` to /dev/full, a FIFO nobody reads, a socket, a directory: exit 0 is a
            false ok; `snapshot -o` to a FIFO whose reader never reads: no answer is a hang (a reader that
            leaves mid-write: tests/test_fsutil.py, with a document larger than a pipe holds).
  real      (with a Docker daemon) an image built here whose Python and megacpp-env answer with garbage.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.adversarial_r4._common import SPEC, Counts, cli  # noqa: E402

DOCKER = """#!{python}
import os, sys, time
args = sys.argv[1:]
def answer(name, default=""):
    path = os.environ.get(name)
    return open(path).read() if path else default
if args[:2] == ["image", "inspect"]:
    sys.stdout.write(answer("FAKE_LABELS", "null"))
elif args[:1] == ["run"]:
    if os.environ.get("FAKE_SLEEP"):
        time.sleep(float(os.environ["FAKE_SLEEP"]))
    if os.environ.get("FAKE_FLOOD"):
        while True:
            sys.stdout.write("x" * 65536)
    if "bash" in args:
        sys.stdout.write(answer("FAKE_DIFF", "{{}}"))
    else:
        sys.stdout.write(answer("FAKE_DISTS"))
"""
DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 50_000 + "1" + "}" * 50_000
GARBAGE = [None, True, 5, 1.5, "x", [], {}, ["x"], [1], {"a": 1}, [{}]]
FIELDS = [("name",), ("version",), ("purl",), ("bom-ref",), ("type",), ("externalReferences",), ("hashes",),
          ("externalReferences", 0), ("externalReferences", 0, "url"), ("externalReferences", 0, "type"),
          ("externalReferences", 0, "hashes"), ("externalReferences", 0, "hashes", 0),
          ("externalReferences", 0, "hashes", 0, "content"), ("externalReferences", 0, "hashes", 0, "alg")]  # fmt: skip


def _well_typed(field: tuple[object, ...], value: object) -> bool:
    arrays = (("externalReferences",), ("hashes",), ("externalReferences", 0, "hashes"))
    if field in arrays:
        return value == []
    return isinstance(value, str) and field[-1] != "content" and isinstance(field[-1], str)


def _good_sbom() -> str:
    from megacpp_env.sbom import image_sbom, render_sbom
    from megacpp_env.spec import load_spec

    spec = load_spec(ROOT / "stack.yaml")
    return render_sbom(image_sbom(spec, spec.targets["smoke"], "linux/amd64"))


class Image:
    def __init__(self, tmp: Path, counts: Counts) -> None:
        self.tmp, self.counts = tmp, counts
        self.exe = tmp / "docker"
        self.exe.write_text(DOCKER.format(python=sys.executable))
        self.exe.chmod(0o755)
        self.good = _good_sbom()
        self.n = 0

    def verify(self, *, dists: object = None, sbom: object = None, labels: object = None, diff: object = None,
               extra: tuple[str, ...] = (), env: dict[str, str] | None = None) -> tuple[int | None, str]:  # fmt: skip
        sbom_text = self.good if sbom is None else sbom
        digest = hashlib.sha256(sbom_text.encode()).hexdigest() if isinstance(sbom_text, str) else ""
        answers = {
            "FAKE_DISTS": dists if dists is not None else {"dists": [], "sbom": sbom_text},
            "FAKE_LABELS": labels if labels is not None else {"io.megacpp.env.sbom-sha256": digest},
            "FAKE_DIFF": diff if diff is not None else "{}",
        }
        full_env = {"MEGACPP_DOCKER": str(self.exe), **(env or {})}
        for name, value in answers.items():
            self.n += 1
            path = self.tmp / f"{name}.{self.n}"
            path.write_text(value if isinstance(value, str) else json.dumps(value))
            full_env[name] = str(path)
        rc, out, err = cli(self.counts, ["verify-image", "img:1", *extra, "--spec", SPEC], env=full_env)
        if "\x1b" in out + err or "\u202e" in out + err:
            self.counts["escapes"] += 1  # the image's control characters reached the terminal
        return rc, err

    def hostile(self, **answers: object) -> None:
        rc, _err = self.verify(**answers)  # type: ignore[arg-type]
        if rc == 0:
            self.counts["false_oks"] += 1
            print(f"false ok: {str(answers)[:300]}", file=sys.stderr)


def answers(tmp: Path) -> Counts:
    counts = Counts()
    img = Image(tmp, counts)
    rc, err = img.verify()
    assert rc == 0, f"the control answer failed: {err[-300:]}"  # the fake is not failing everything
    for listing in ["Traceback", [], '"dists"', DEEP, DEEP_OBJECT, {"dists": "x"}, {"dists": [["a", "1", ""]]},
                    {"dists": [{"n": "a"}]}, {"dists": [[5, "1", "", []]]}, {"dists": [["a", ["1"], "", []]]},
                    {"dists": [["a", "1", "", "f.py"]]}, {"dists": [["a", "1", "", [3]]]},
                    {"dists": [["a\x1b[2J", "1", "", []]]}, {"dists": [["a", "1", "", ["x\u202ey"]]]},
                    {"dists": [["a", "1", "", []]], "sbom": 5}]:  # fmt: skip
        img.hostile(dists=listing)
    doc = json.loads(img.good)
    for field in FIELDS:
        for value in GARBAGE:
            edited = json.loads(img.good)
            node = next(c for c in edited["components"] if c.get("externalReferences"))
            for key in field[:-1]:
                node = node[key]
            if _well_typed(field, value):
                continue  # a string where a string goes, an empty array: not garbage
            node[field[-1]] = value
            img.hostile(sbom=json.dumps(edited))
    for text in ["[1]", "{", DEEP, DEEP_OBJECT, '"CycloneDX"', json.dumps({**doc, "components": {}}),
                 json.dumps({**doc, "specVersion": 1.6}), json.dumps({**doc, "components": ["x"]})]:  # fmt: skip
        img.hostile(sbom=text)
        given = tmp / f"given-{img.n}.json"
        given.write_text(text)
        img.hostile(extra=("--sbom", str(given)))
    for labels in ["abc", "[1]", '"text"', DEEP, DEEP_OBJECT, {"a": 1}, {"a": {"b": "c"}}]:
        img.hostile(labels=labels)
    for diff in ["not json", "[]", DEEP, DEEP_OBJECT, '"x"']:
        img.hostile(diff=diff, extra=("--json",))
    img.verify(diff="drift \x1b]0;pwned\x07 \u202eevil\n", labels={})  # text mode: escaped, or an escape
    img.hostile(env={"FAKE_SLEEP": "120", "MEGACPP_ENV_IMAGE_RUN_TIMEOUT": "3"})
    img.hostile(env={"FAKE_FLOOD": "1"})  # 64 MiB, then stopped
    return counts


def outputs(tmp: Path) -> Counts:
    counts = Counts()
    env = {"MEGACPP_ENV_OUTPUT_WAIT": "2"}
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp / "sock"))
    (tmp / "dir").mkdir()

    def sbom_to(target: str) -> None:
        rc, _out, _err = cli(counts, ["sbom", "smoke", "--output", target, "--spec", SPEC], env=env)
        if rc == 0:
            counts["false_oks"] += 1

    for target in ("/dev/full", str(fifo), str(tmp / "sock"), str(tmp / "dir")):
        sbom_to(target)
    holder = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader that never reads: only a hang is bad
    try:  # (a document larger than the pipe holds fails after MEGACPP_ENV_OUTPUT_WAIT; a smaller one fits)
        cli(counts, ["snapshot", "-o", str(fifo), "--spec", SPEC], env=env)
    finally:
        os.close(holder)

    sock.close()
    return counts


def real(tmp: Path) -> Counts:
    counts = Counts()
    from megacpp_env import docker

    if not docker.daemon_ok() or not docker.image_exists("megacpp-base/debian-forky:amd64"):
        print("note: image/real skipped: no Docker daemon or no megacpp-base/debian-forky:amd64")
        return counts
    (tmp / "python").write_text('#!/bin/sh\nprintf \'%s\' \'{"dists": [["x", 5, "", []]], "sbom": "[[[["}\'\n')
    (tmp / "megacpp-env").write_text(
        '#!/bin/sh\n[ "$1" = snapshot ] && exit 0\nprintf "drift \\033]0;x\\007\\n"\nexit 1\n'
    )
    (tmp / "Dockerfile").write_text(
        "FROM megacpp-base/debian-forky:amd64\nCOPY --chmod=755 python /opt/venv/bin/python\n"
        "COPY --chmod=755 megacpp-env /usr/local/bin/megacpp-env\nLABEL io.megacpp.env.sbom-sha256=[1]\n"
    )
    tag = f"megacpp-adv/hostile-{os.getpid()}:1"
    subprocess.run([docker.binary(), "build", "-q", "-t", tag, str(tmp)], env=docker.environ(), check=True,
                   capture_output=True)  # fmt: skip
    try:
        rc, out, err = cli(counts, ["verify-image", tag, "--spec", SPEC])
        counts["false_oks"] += rc == 0
        counts["escapes"] += "\x1b" in out + err
    finally:
        docker.remove_image(tag)
    return counts


def run(tmp: Path) -> dict[str, int]:
    total = Counts()
    for case in (answers, outputs, real):
        where = tmp / case.__name__
        where.mkdir()
        for key, value in case(where).items():
            total[key] += value
    return total


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="adv-r4-image-") as scratch:
        print(json.dumps(run(Path(scratch)), sort_keys=True))
