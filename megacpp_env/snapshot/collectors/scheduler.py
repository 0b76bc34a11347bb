"""The batch scheduler a snapshot runs under (Slurm, PBS), from its environment variables.

Hashed: which scheduler, and the resources the job was given (CPUs per task, GPUs, tasks, nodes,
memory, CPU binding): the same program is a different benchmark with half the CPUs. Recorded
outside the digest (``live``): the job and step ids, node names, directories and every other
variable of the scheduler, which differ for every job and say nothing about the environment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from megacpp_env.redact import REDACTED, is_secret_name
from megacpp_env.snapshot.parts import Parts

if TYPE_CHECKING:
    from megacpp_env.snapshot.context import Context
    from megacpp_env.snapshot.scrub import Scrubber

PREFIXES = {"slurm": "SLURM_", "pbs": "PBS_"}
# The variables that describe the shape of the allocation (Slurm's sbatch/srun "OUTPUT ENVIRONMENT
# VARIABLES"; PBS Pro's NCPUS/OMP_NUM_THREADS are per chunk, PBS_NUM_* are Torque's).
RESOURCES = frozenset(
    {
        "SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE", "SLURM_CPUS_PER_GPU", "SLURM_CPU_BIND",
        "SLURM_CPU_BIND_TYPE", "SLURM_DISTRIBUTION", "SLURM_GPUS", "SLURM_GPUS_ON_NODE",
        "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK", "SLURM_JOB_CPUS_PER_NODE", "SLURM_JOB_NUM_NODES",
        "SLURM_MEM_PER_CPU", "SLURM_MEM_PER_GPU", "SLURM_MEM_PER_NODE", "SLURM_NNODES", "SLURM_NTASKS",
        "SLURM_NTASKS_PER_NODE", "SLURM_NTASKS_PER_GPU", "SLURM_TASKS_PER_NODE", "SLURM_THREADS_PER_CORE",
        "SLURM_HINT", "SLURM_JOB_PARTITION", "PBS_NUM_NODES", "PBS_NUM_PPN", "PBS_NP", "PBS_QUEUE", "NCPUS",
    }
)  # fmt: skip
JOB_ID = {"slurm": ("SLURM_JOB_ID", "SLURM_JOBID"), "pbs": ("PBS_JOBID",)}


def which(environ: Mapping[str, str]) -> str | None:
    for name, prefix in PREFIXES.items():
        if any(key.startswith(prefix) for key in environ):
            return name
    return None


def split(environ: Mapping[str, str], scrubber: Scrubber | None = None) -> Parts:
    """Pure: (hashed facts, live part) of the scheduler variables in ``environ``."""
    name = which(environ)
    if name is None:
        return Parts(facts={"name": None}, live={})
    prefix = PREFIXES[name]
    mine = {k: v for k, v in environ.items() if k.startswith(prefix) or (k == "NCPUS" and name == "pbs")}
    if scrubber is not None:  # as for every recorded variable: secret-named values redacted, URLs stripped
        mine = {k: REDACTED if is_secret_name(k) and v else scrubber.clean(v) for k, v in mine.items()}
    resources = {k: v for k, v in sorted(mine.items()) if k in RESOURCES}
    job_id = next((mine[k] for k in JOB_ID[name] if k in mine), None)
    live = {"job_id": job_id, "variables": {k: v for k, v in sorted(mine.items()) if k not in RESOURCES}}
    return Parts(facts={"name": name, "resources": resources}, live=live)


def start(ctx: Context) -> Callable[[], Parts]:
    return lambda: split(ctx.environ, ctx.scrubber)
