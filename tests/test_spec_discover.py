"""spec/discover.py: --spec, then $MEGACPP_ENV_SPEC, then the nearest stack.yaml upward."""

from __future__ import annotations

import pytest

from megacpp_env.errors import SpecError
from megacpp_env.spec.discover import chosen_path, required_path, search_upward


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.delenv("MEGACPP_ENV_SPEC", raising=False)
    outer = tmp_path / "outer"
    inner = outer / "proj" / "images" / "smoke"
    inner.mkdir(parents=True)
    (outer / "stack.yaml").write_text("outer\n")
    (outer / "proj" / "stack.yaml").write_text("proj\n")
    return outer


def test_nearest_spec_wins(tree):
    assert search_upward(tree / "proj" / "images" / "smoke") == tree / "proj" / "stack.yaml"
    assert search_upward(tree) == tree / "stack.yaml"


def test_a_directory_named_stack_yaml_is_skipped(tree):
    (tree / "proj" / "images" / "stack.yaml").mkdir()
    assert search_upward(tree / "proj" / "images" / "smoke") == tree / "proj" / "stack.yaml"


def test_explicit_then_environment_then_search(tree, monkeypatch):
    start = tree / "proj" / "images"
    assert chosen_path("elsewhere.yaml", start).as_posix() == "elsewhere.yaml"
    monkeypatch.setenv("MEGACPP_ENV_SPEC", str(tree / "stack.yaml"))
    assert chosen_path(None, start) == tree / "stack.yaml"
    assert chosen_path("x.yaml", start).as_posix() == "x.yaml"  # --spec beats the environment
    monkeypatch.setenv("MEGACPP_ENV_SPEC", "")
    assert chosen_path(None, start) == tree / "proj" / "stack.yaml"


def test_relative_start_is_made_absolute(tree, monkeypatch):
    monkeypatch.chdir(tree / "proj" / "images")
    assert chosen_path(None) == tree / "proj" / "stack.yaml"


def test_not_found_names_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.delenv("MEGACPP_ENV_SPEC", raising=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    if search_upward(empty) is not None:
        pytest.skip(f"a stack.yaml above the temporary directory ({search_upward(empty)}) hides the miss")
    assert chosen_path(None, empty) is None
    with pytest.raises(SpecError) as exc:
        required_path(None, empty)
    assert str(exc.value) == (
        f"no stack.yaml in {empty} or any parent directory (searched up to /) "
        "(remedy: run inside the project, pass --spec PATH or set MEGACPP_ENV_SPEC)"
    )
