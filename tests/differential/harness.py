"""Set-up shared by the tests and ``python -m tests.differential``: the template worlds (once),
engines per tool copy (a tool server and a golden per lane), and a tool copy made from a commit.

A *lane* is one world path with its own template: lanes run mutations side by side (the calls
mostly wait on child processes: git, the probe, the integrity workers), ``MEGACPP_DIFF_LANES``
of them (default 2).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.differential.client import ToolServer
from tests.differential.engine import Differential
from tests.differential.world import World, build_template

REPO_ROOT = Path(__file__).resolve().parents[2]
LANES_ENV = "MEGACPP_DIFF_LANES"


def lanes() -> int:
    return max(1, int(os.environ.get(LANES_ENV) or 2))


@dataclass(frozen=True, kw_only=True, slots=True)
class Lane:
    world: World
    template: Path


@dataclass(frozen=True, kw_only=True, slots=True)
class Harness:
    base: Path
    lanes: tuple[Lane, ...]

    @classmethod
    def build(cls, base: Path, count: int | None = None) -> Harness:
        built = []
        for i in range(lanes() if count is None else count):
            lane = Lane(world=World(root=base / f"world-{i}"), template=base / f"template-{i}")
            build_template(lane.template, lane.world)
            built.append(lane)
        return cls(base=base, lanes=tuple(built))

    @contextlib.contextmanager
    def engines(self, tool_root: Path, name: str) -> Iterator[list[Differential]]:
        """One ``Differential`` per lane for the tool copy at ``tool_root``, each golden taken by it."""
        with contextlib.ExitStack() as stack:
            out = []
            for i, lane in enumerate(self.lanes):
                server = ToolServer(tool_root, self.base / f"server-{name}-{i}.log").start()
                stack.callback(server.stop)
                engine = Differential(server, lane.world, lane.template, self.base / f"golden-{name}-{i}")
                engine.take_golden()
                out.append(engine)
            yield out


def tool_at(commit: str, dest: Path, repo: Path = REPO_ROOT) -> Path:
    """``megacpp_env/`` as it was at ``commit`` (``git archive``), under ``dest``: a tool root."""
    done = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", commit, "megacpp_env"], capture_output=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"git archive {commit} megacpp_env failed (a shallow clone?): {done.stderr.decode()[-500:]}")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest
