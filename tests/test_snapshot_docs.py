"""docs/SNAPSHOT.md: its field reference is the schema's (regenerated, never stale) and its
changelog has a row for every schema version this megacpp-env writes or reads."""

from __future__ import annotations

import re
import subprocess
import sys

from megacpp_env.snapshot.document import READABLE_VERSIONS, SCHEMA_VERSION
from tests.conftest import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "SNAPSHOT.md"


def test_field_reference_is_generated_from_the_schema():
    proc = subprocess.run(
        [sys.executable, "-S", str(REPO_ROOT / "scripts" / "snapshot_docs.py"), "--check"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip  (-S: the generator needs the standard library only)
    assert proc.returncode == 0, proc.stderr


def test_the_checker_sees_a_stale_page(tmp_path, monkeypatch):
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    try:
        import snapshot_docs
    finally:
        sys.path.pop(0)
    stale = PAGE.read_text().replace("| `facts.gpu.devices[].power_limit_w` |", "| `facts.gpu.devices[].power_w` |")
    page = tmp_path / "SNAPSHOT.md"
    page.write_text(stale)
    monkeypatch.setattr(snapshot_docs, "PAGE", page)
    monkeypatch.setattr(sys, "argv", ["snapshot_docs.py", "--check"])
    assert snapshot_docs.main() == 1
    monkeypatch.setattr(sys, "argv", ["snapshot_docs.py"])
    assert snapshot_docs.main() == 0 and page.read_text() == PAGE.read_text()


def test_changelog_has_every_version():
    text = PAGE.read_text()
    rows = {int(m) for m in re.findall(r"^\| (\d+) \| ", text, re.M)}
    assert {SCHEMA_VERSION, *READABLE_VERSIONS} <= rows
    assert f'"schema_version": {SCHEMA_VERSION}' in text
