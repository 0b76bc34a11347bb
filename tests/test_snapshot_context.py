"""What surrounds the environment: the training repository (real git repositories), the scheduler,
the container, the CPU and NUMA layout; and which of it counts in the digest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from megacpp_env.cli import main
from megacpp_env.errors import SpecError
from megacpp_env.snapshot.collect import take_snapshot
from megacpp_env.snapshot.collectors import container, repo, scheduler, system
from megacpp_env.snapshot.collectors.envvars import Scrubber
from megacpp_env.snapshot.diff import diff_snapshots
from tests.fixtures.git_repos import commit_all, make_repo, one_line_error

# ---- the training repository ------------------------------------------------------------------


@pytest.fixture
def training(tmp_path: Path) -> Path:
    path = tmp_path / "train"
    make_repo(path, {"train.py": "lr = 1e-3\n", "conf/model.yaml": "layers: 2\n", "? trap.yaml": "x: 1\n"})
    return path


def test_repo_facts_from_a_subdirectory(training):
    facts = repo.collect(training / "conf")
    assert facts["path"] == str(training) and facts["git"] is True
    assert facts["branch"] == "main" and len(facts["commit"]) == 40
    assert (facts["dirty"], facts["changed"], facts["untracked"]) == (False, 0, 0)
    assert facts["diff_digest"] == repo.EMPTY_DIFF


def test_repo_local_changes_change_the_diff_digest(training):
    (training / "train.py").write_text("lr = 3e-4\n")
    one = repo.collect(training)
    (training / "notes.txt").write_text("scratch\n")
    two = repo.collect(training)
    (training / "train.py").write_text("lr = 1e-4\n")
    three = repo.collect(training)
    assert (one["dirty"], one["changed"], one["untracked"]) == (True, 1, 0)
    assert (two["changed"], two["untracked"]) == (1, 1) and two["diff_digest"] == one["diff_digest"]  # untracked: counted
    assert three["diff_digest"] not in (one["diff_digest"], repo.EMPTY_DIFF)
    (training / "? trap.yaml").rename(training / "conf" / "renamed.yaml")
    from megacpp_env import git

    git.run_git(["add", "-A"], training)
    staged = repo.collect(training)
    # by content (no rename detection): train.py modified, notes.txt and conf/renamed.yaml added, and
    # "? trap.yaml" (spelled like an untracked entry) deleted
    assert (staged["changed"], staged["untracked"]) == (4, 0)


def test_repo_detached_head_and_no_repository(training, tmp_path):
    first = repo.collect(training)["commit"]
    (training / "train.py").write_text("lr = 2e-3\n")
    commit_all(training, "second")
    from megacpp_env import git

    git.run_git(["checkout", "--quiet", first], training)
    facts = repo.collect(training)
    assert (facts["commit"], facts["branch"]) == (first, None)
    outside = tmp_path / "plain"
    outside.mkdir()
    assert repo.collect(outside) == {"path": str(outside), "git": False}


def test_repo_option_is_checked_before_the_snapshot(tmp_path, capsys):
    with pytest.raises(SpecError, match=r"--repo: .*nowhere: not a directory"):
        repo.check_repo(tmp_path / "nowhere")
    plain = tmp_path / "plain"
    plain.mkdir()
    assert main(["snapshot", "--repo", str(plain), "-o", str(tmp_path / "s.json")]) == 1
    assert one_line_error(capsys) == (
        f"megacpp-env snapshot: error: --repo: {plain}: not inside a git work tree "
        "(remedy: name the training repository)\n"
    )
    assert not (tmp_path / "s.json").exists()


def test_training_repository_commits_do_not_change_the_digest(training, snap_options):
    """What the brief asks: a golden check or a bisect across commits of the training code keeps
    comparing the environment only; the diff says which commit each snapshot was taken at."""
    a = take_snapshot(snap_options(repo=training))
    (training / "train.py").write_text("lr = 5e-4\n")
    b = take_snapshot(snap_options(repo=training))
    commit_all(training, "tune")
    c = take_snapshot(snap_options(repo=training))
    assert a.digest == b.digest == c.digest
    assert a.live["repo"]["commit"] != c.live["repo"]["commit"] and b.live["repo"]["dirty"]
    report = diff_snapshots(a, c)
    assert not report.drift
    (note,) = [f for f in report.findings if f.area == "repo"]
    assert note.severity == "note" and note.message == (
        f"training repository: {a.live['repo']['commit'][:12]} -> {c.live['repo']['commit'][:12]}"
    )
    assert "repo" not in a.facts


def test_default_repository_is_the_working_directorys(training, snap_options, monkeypatch):
    monkeypatch.chdir(training / "conf")
    snap = take_snapshot(snap_options())
    assert snap.live["repo"]["path"] == str(training) and snap.host["cwd"] == str(training / "conf")


# ---- scheduler ----------------------------------------------------------------------------------

SLURM = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NODELIST": "gpu[01-02]",
    "SLURM_CPUS_PER_TASK": "16",
    "SLURM_GPUS_ON_NODE": "8",
    "SLURM_NTASKS": "16",
    "SLURM_SUBMIT_DIR": "/home/me/run",
    "SLURM_STEP_ID": "0",
    "SLURM_JOB_ACCOUNT_TOKEN": "s3cr3t-v4lue",
}


def test_slurm_job_ids_live_resources_hashed():
    parts = scheduler.split({**SLURM, "PATH": "/bin"}, Scrubber(SLURM))
    assert parts.facts == {
        "name": "slurm",
        "resources": {"SLURM_CPUS_PER_TASK": "16", "SLURM_GPUS_ON_NODE": "8", "SLURM_NTASKS": "16"},
    }
    assert parts.live["job_id"] == "4242"
    assert parts.live["variables"]["SLURM_JOB_NODELIST"] == "gpu[01-02]"
    assert parts.live["variables"]["SLURM_JOB_ACCOUNT_TOKEN"] == "<redacted>"
    assert scheduler.split({"PATH": "/bin"}).facts == {"name": None}
    pbs = scheduler.split({"PBS_JOBID": "7.server", "PBS_NUM_PPN": "32", "NCPUS": "32"})
    assert pbs.facts == {"name": "pbs", "resources": {"NCPUS": "32", "PBS_NUM_PPN": "32"}}
    assert pbs.live == {"job_id": "7.server", "variables": {"PBS_JOBID": "7.server"}}


def test_another_job_same_digest_another_allocation_drift(snap_options):
    environ = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV" and not k.startswith(("SLURM_", "PBS_"))}
    a = take_snapshot(snap_options(environ={**environ, **SLURM}))
    b = take_snapshot(snap_options(environ={**environ, **SLURM, "SLURM_JOB_ID": "4243", "SLURM_STEP_ID": "1"}))
    c = take_snapshot(snap_options(environ={**environ, **SLURM, "SLURM_CPUS_PER_TASK": "8"}))
    assert a.digest == b.digest != c.digest
    assert a.live["scheduler"]["job_id"] == "4242" and b.live["scheduler"]["job_id"] == "4243"
    assert [f.key for f in diff_snapshots(a, b).findings if f.area == "scheduler"] == []
    assert [f.message for f in diff_snapshots(a, c).findings if f.area == "scheduler"] == [
        "scheduler: resources.SLURM_CPUS_PER_TASK: 16 -> 8"
    ]


# ---- container ----------------------------------------------------------------------------------

CID = "4f0c" + "a" * 60


def test_container_evidence():
    none: dict[str, str | None] = dict.fromkeys(container.EVIDENCE)
    assert container.facts_from({}, none) == {"runtime": None}
    docker = {**none, "/.dockerenv": "", "/proc/self/cgroup": "0::/\n"}
    mountinfo = f"612 600 0:52 /var/lib/docker/containers/{CID}/hostname /etc/hostname rw,relatime - ext4 /dev/sda1 rw\n"
    assert container.facts_from({}, {**docker, "/proc/self/mountinfo": mountinfo}) == {"runtime": "docker", "id": CID}
    v1 = f"12:memory:/docker/{CID}\n"
    assert container.facts_from({}, {**none, "/proc/self/cgroup": v1}) == {"runtime": "container", "id": CID}
    podman = 'engine="podman-5.4.2"\nname="train"\nid="' + CID + '"\nimage="quay.io/me/train:1"\nimageid="' + "b" * 64 + '"\n'
    assert container.facts_from({}, {**none, "/run/.containerenv": podman}) == {
        "runtime": "podman", "id": CID, "image": "quay.io/me/train:1", "image_id": "b" * 64,
    }  # fmt: skip
    sif = {"APPTAINER_CONTAINER": "/images/train.sif"}
    assert container.facts_from(sif, none) == {"runtime": "apptainer", "image": "/images/train.sif"}


def test_a_docker_hosts_own_mounts_are_not_a_container():
    """On a docker host, mountinfo lists every running container's shm mount: not evidence."""
    host_mounts = f"700 29 0:60 / /var/lib/docker/containers/{CID}/mounts/shm rw - tmpfs shm rw\n"
    files = {**dict.fromkeys(container.EVIDENCE), "/proc/self/cgroup": "0::/user.slice\n", "/proc/self/mountinfo": host_mounts}
    assert container.facts_from({}, files) == {"runtime": None}


def test_container_is_recorded_not_hashed(snap_options):
    snap = take_snapshot(snap_options())
    assert "container" not in snap.facts and snap.live["container"] == container.collect(os.environ)


# ---- system: CPU flags, NUMA --------------------------------------------------------------------

CPUINFO = "processor\t: 0\nmodel name\t: AMD EPYC 9654\nflags\t\t: fpu avx2 avx512f sse4_2 avx2\n\nprocessor\t: 1\nflags\t\t: fpu\n"


def test_cpu_flags_and_model_from_cpuinfo():
    fields = system.cpuinfo_fields(CPUINFO)
    assert system.cpu_model(fields) == "AMD EPYC 9654"
    assert system.cpu_flags(fields) == ["avx2", "avx512f", "fpu", "sse4_2"]
    arm = system.cpuinfo_fields("processor\t: 0\nFeatures\t: fp asimd sve2\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n")
    assert system.cpu_flags(arm) == ["asimd", "fp", "sve2"] and system.cpu_model(arm) == "CPU implementer=0x41 CPU part=0xd4f"


def test_numa_layout(tmp_path):
    for node, cpus, kb in ((0, "0-31,64-95", 263782400), (1, "32-63,96-127", 264200192)):
        d = tmp_path / f"node{node}"
        d.mkdir()
        (d / "cpulist").write_text(cpus + "\n")
        (d / "meminfo").write_text(f"Node {node} MemTotal:       {kb} kB\nNode {node} MemFree: 1 kB\n")
    (tmp_path / "possible").write_text("0-1\n")
    nodes, memory = system.numa(tmp_path)
    assert nodes == [{"node": 0, "cpus": "0-31,64-95"}, {"node": 1, "cpus": "32-63,96-127"}]
    assert memory == {"0": 257600, "1": 258008}
    assert system.numa(tmp_path / "absent") == ([], {})


def test_this_machines_system_facts():
    parts = system.collect()
    real_nodes, _ = system.numa()
    assert parts.facts["numa_nodes"] == real_nodes and parts.facts["cpu_flags"]
    assert set(parts.live) == {"numa_memory_mib"}
    assert "memory" not in str(sorted(parts.facts))  # memory drifts on VMs: never hashed
