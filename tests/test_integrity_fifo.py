"""Issue 19 item 5's sibling in the snapshot: a FIFO planted where a RECORD or a recorded file should
be is refused, never waited on (the integrity pass opens every hashed file)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from megacpp_env.snapshot.verify.integrity_worker import hash_file, read_record


def _returns_within(fn, seconds: float = 10.0):
    out: list[object] = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "blocked on a FIFO"
    return out[0]


def test_a_fifo_recorded_file_is_not_hashed(tmp_path: Path) -> None:
    fifo = tmp_path / "mod.py"
    os.mkfifo(fifo)
    assert _returns_within(lambda: hash_file(str(fifo), "sha256", -1)) is None
    real = tmp_path / "real.py"
    real.write_bytes(b"x = 1\n")
    assert str(_returns_within(lambda: hash_file(str(real), "sha256", 6))).startswith("sha256=")


def test_a_fifo_record_reads_as_no_rows(tmp_path: Path) -> None:
    info = tmp_path / "demo-1.dist-info"
    info.mkdir()
    os.mkfifo(info / "RECORD")
    assert _returns_within(lambda: read_record(str(tmp_path), str(info))) == []
    (info / "RECORD").unlink()
    (info / "RECORD").write_text("demo/__init__.py,sha256=abc,3\n")
    rows = _returns_within(lambda: read_record(str(tmp_path), str(info)))
    assert [r[0] for r in rows] == ["demo/__init__.py"]
