"""Issue 31, round 4, the jobs formula (defect 4): `build-source --dry-run --resources-root DIR` on
hostile /proc and /sys trees.

    python -m benchmarks.adversarial_r4.jobs      prints the counts as JSON

Each file the formula reads (meminfo, self/status, self/cgroup, memory.max, memory.current, memory.stat,
cpu.max, and cgroup v1's) in turn: a number of 5,000 digits, Unicode digits, a negative one, a FIFO;
cgroup paths of 65, 5,000 and 200,000 levels; ``..`` paths and links out of the tree, where a directory
outside holds a 1 GiB limit and a 3-CPU quota. Bad counts: tracebacks, hangs (no answer in 60 s),
escapes (the decision used a number from outside the tree), false_oks (a decision outside 1..65536 CPUs).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.adversarial_r4._common import SPEC, Counts, cli  # noqa: E402

GIB = 1 << 30
HUGE = "9" * 5000
V2 = {
    "memory.max": f"{12 * GIB}\n", "memory.current": f"{5 * GIB}\n", "memory.stat": f"inactive_file {3 * GIB}\n",
    "cpu.max": "350000 100000\n",
}  # fmt: skip
V1 = {
    "memory/x/memory.limit_in_bytes": f"{16 * GIB}\n", "memory/x/memory.usage_in_bytes": f"{4 * GIB}\n",
    "cpu,cpuacct/x/cpu.cfs_quota_us": "600000\n", "cpu,cpuacct/x/cpu.cfs_period_us": "100000\n",
}  # fmt: skip
VALUES = [HUGE, "²", "\u0663\u0665", "-5", "1" * 21, "", "max max max", "0x10", "1e9", "\x00\x01"]


def tree(root: Path, *, v1: bool = False, cgroup: str = "/docker/abc", override: dict[str, str] | None = None) -> Path:
    """A /proc and /sys under ``root`` (cgroup v2 at ``cgroup``, or v1 at /x), with files replaced."""
    files = {"proc/meminfo": f"MemTotal: {200 << 20} kB\nMemAvailable: {100 << 20} kB\n",
             "proc/self/status": "Name:\tx\nCpus_allowed_list:\t0-15\n"}  # fmt: skip
    if v1:
        files["proc/self/cgroup"] = "12:memory:/x\n4:cpu,cpuacct:/x\n"
        files.update({f"sys/fs/cgroup/{k}": v for k, v in V1.items()})
    else:
        files["proc/self/cgroup"] = f"0::{cgroup}\n"
        files["sys/fs/cgroup/cgroup.controllers"] = "cpu memory\n"
        files.update({f"sys/fs/cgroup/docker/abc/{k}": v for k, v in V2.items()})
    files.update(override or {})
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def decide(counts: Counts, root: Path) -> dict[str, object] | None:
    argv = ["build-source", "megacpp_smoke_ext", "--target", "smoke", "--dry-run", "--json",
            "--resources-root", str(root), "--spec", SPEC]  # fmt: skip
    rc, out, _err = cli(counts, argv, timeout=60)
    if rc != 0:
        return None
    try:
        doc = json.loads(out)
    except ValueError:
        return None
    jobs = doc.get("jobs", doc)
    resources = jobs.get("resources", {}) if isinstance(jobs, dict) else {}
    cpus = resources.get("cpus", 1)
    if not (isinstance(cpus, int) and 1 <= cpus <= 1 << 16):
        counts["false_oks"] += 1
    return resources


def run(tmp: Path) -> dict[str, int]:
    counts = Counts()
    n = 0
    v2_files = [*(f"sys/fs/cgroup/docker/abc/{k}" for k in V2), "proc/meminfo", "proc/self/status"]
    v1_files = [f"sys/fs/cgroup/{k}" for k in V1]
    for files, v1 in ((v2_files, False), (v1_files, True)):
        for rel in [*files, "proc/self/cgroup"]:
            for value in VALUES:
                n += 1
                key = rel.rsplit("/", 1)[-1]
                text = f"{key.split('.')[0]}: {value} kB\n" if key in ("meminfo", "status") else f"{value}\n"
                decide(counts, tree(tmp / str(n), v1=v1, override={rel: text}))
            n += 1
            root = tree(tmp / str(n), v1=v1)
            (root / rel).unlink()
            os.mkfifo(root / rel)
            decide(counts, root)
    for depth in (65, 5000, 200_000):
        n += 1
        decide(counts, tree(tmp / str(n), cgroup="/" + "/".join(["a"] * depth)))
    outside = tmp / "outside"
    outside.mkdir()
    for name, text in (("memory.max", f"{GIB}\n"), ("memory.current", "0\n"), ("cpu.max", "300000 100000\n")):
        (outside / name).write_text(text)
    for cgroup in ("/../../../outside", "/docker/../../../../outside", "/./../outside", "/link", "/abc/../../x"):
        n += 1
        root = tree(tmp / str(n), cgroup=cgroup)
        (root / "sys/fs/cgroup/link").symlink_to(outside)
        (root / "sys/fs/cgroup/memory.max").symlink_to(outside / "memory.max")
        resources = decide(counts, root)
        if resources is not None and ("outside" in json.dumps(resources) or resources.get("memory_gib") == 1.0):
            counts["escapes"] += 1
    return counts


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="adv-r4-jobs-") as scratch:
        print(json.dumps(run(Path(scratch)), sort_keys=True))
