"""Issue 31, round 4, standard streams (defect 3): every verb started with stdout closed (``>&-``), stdout
full (``>/dev/full``), stderr closed (``2>&-``) and both closed, against the same verb with both open.

    python -m benchmarks.adversarial_r4.streams      prints the counts as JSON

Bad counts: tracebacks (exit 3, a traceback); false_oks (exit 0 from a verb whose result, what it wrote
to stdout with the streams open, had nowhere to go); partials (a result that goes to a file, `sbom
--output FILE` or `snapshot -o FILE`, not written with the streams closed); escapes (an error message on
stdout when only stderr was closed).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.adversarial_r4._common import SPEC, Counts, cli  # noqa: E402


def argvs(tmp: Path) -> dict[str, list[str]]:
    """One command line per verb: a real result where one is cheap here, else the verb's error path."""
    snap, golden = tmp / "snap.json", tmp / "golden"
    return {
        "check": ["check"], "facts": ["facts", "show", "megacpp_smoke_ext"], "targets": ["targets"],
        "schema": ["schema"], "show": ["show", "smoke"], "render": ["render", "--check"],
        "lock": ["lock", "--check", "smoke"], "gate": ["gate", "--base", "HEAD"],
        "mirror": ["mirror", "nope", "--to", str(tmp / "m")],
        "mirror-artifacts": ["mirror-artifacts", "nope", "--to", str(tmp / "m")],
        "mirror-sources": ["mirror-sources", "--to", str(tmp / "ms"), "nope"], "checkout": ["checkout", "nope"],
        "verify-checkout": ["verify-checkout", str(tmp)],
        "overlay": ["overlay", "status", "smoke-ext", "--checkout", str(tmp / "none")],
        "build-source": ["build-source", "megacpp_smoke_ext", "--target", "smoke", "--dry-run"],
        "build": ["build", "smoke", "--dry-run"], "pin-base": ["pin-base", "smoke", "--help"],
        "sbom": ["sbom", "smoke"], "verify-image": ["verify-image", "img:1"],
        "snapshot": ["snapshot", "-o", str(snap), "--golden", "g", "--golden-dir", str(golden)],
        "diff": ["diff", str(snap), str(snap)], "doctor": ["doctor", "smoke", "--snapshot", str(snap)],
        "completion": ["completion", "bash"],
        "reproduce": ["reproduce", "nope", "--venv", str(tmp / "v"), "--checkouts", str(tmp / "c")],
        "run": ["run", "--golden", "g", "--golden-dir", str(golden), "--record", str(tmp / "runs.jsonl"), "--",
                sys.executable, "-c", "pass"],
        "bisect-check": ["bisect-check", "g", "--golden-dir", str(golden)],
        "--help": ["--help"], "--version": ["--version"],
    }  # fmt: skip


def run(tmp: Path) -> dict[str, int]:
    counts = Counts()
    env = {"MEGACPP_DOCKER": "/bin/false", "MEGACPP_ENV_SPEC": SPEC}
    table = argvs(tmp)
    cli(counts, table["snapshot"], env=env)  # the snapshot and golden the later verbs read
    for verb, argv in table.items():
        rc, out, _err = cli(counts, argv, env=env)
        for kind in ({"close": (1,)}, {"full": True}, {"close": (1, 2)}):
            closed_rc, _, _ = cli(counts, argv, env=env, **kind)  # type: ignore[arg-type]
            if out and closed_rc == 0:
                counts["false_oks"] += 1  # a result went nowhere and the exit status said all went well
            elif not out and closed_rc != rc:
                counts["wedges"] += 1  # a verb with nothing for stdout failed for its lack
        closed_rc, closed_out, _ = cli(counts, argv, env=env, close=(2,))
        if closed_rc != rc or "error:" in closed_out or "Traceback" in closed_out:
            counts["escapes"] += 1  # an error went to stdout, or the outcome changed with stderr
        del verb
    for argv, made in (
        (["sbom", "smoke", "--output", str(tmp / "out.cdx.json")], tmp / "out.cdx.json"),
        (["-q", "snapshot", "-o", str(tmp / "s2.json")], tmp / "s2.json"),
    ):
        for close in ((1,), (2,), (1, 2)):
            made.unlink(missing_ok=True)
            rc, _, _ = cli(counts, argv, env=env, close=close)
            if rc != 0 or not made.is_file() or not made.read_text().startswith("{"):
                counts["partials"] += 1
    return counts


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="adv-r4-streams-") as scratch:
        print(json.dumps(run(Path(scratch)), sort_keys=True))
