"""Environment variables that run code in every process are refused in the spec (issue 12, class 9)."""

from __future__ import annotations

import copy

import pytest

from megacpp_env.errors import SpecError
from tests.fixtures.spec import load_data

REFUSED = [
    "BASH_ENV", "ENV", "PROMPT_COMMAND", "PS4", "SHELLOPTS", "IFS", "BASH_FUNC_x",
    "LD_PRELOAD", "LD_AUDIT", "LD_DEBUG_OUTPUT", "GCONV_PATH",
    "PYTHONSTARTUP", "PYTHONHOME", "PYTHONBREAKPOINT", "PERL5OPT", "RUBYOPT", "NODE_OPTIONS", "JAVA_TOOL_OPTIONS",
    "GIT_SSH_COMMAND", "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_EXTERNAL_DIFF", "EDITOR", "PAGER", "LESSOPEN",
]  # fmt: skip


@pytest.mark.parametrize("name", REFUSED)
@pytest.mark.parametrize("where", ["env.build", "env.runtime", "build_env"])
def test_code_running_variables_are_refused_with_a_remedy(stack_data, name, where):
    data = copy.deepcopy(stack_data)
    if where == "build_env":
        data["sources"]["megacpp_smoke_ext"]["build_env"][name] = "/tmp/x.so"
        key = f"sources.megacpp_smoke_ext.build_env.{name}"
    else:
        section = where.split(".")[1]
        data["targets"]["smoke"].setdefault("env", {}).setdefault(section, {})[name] = "/tmp/x.so"
        key = f"targets.smoke.{where}.{name}"
    with pytest.raises(SpecError, match=f"{name} is refused: it makes") as exc:
        load_data(data)
    assert exc.value.key == key
    assert exc.value.remedy


@pytest.mark.parametrize("value", ["relative/lib", "/ok::/also", ":/usr/lib", "/usr/lib:", ".", "$HOME/lib"])
@pytest.mark.parametrize("name", ["LD_LIBRARY_PATH", "PATH", "PYTHONPATH"])
def test_search_paths_hold_absolute_directories_only(stack_data, name, value):
    data = copy.deepcopy(stack_data)
    data["targets"]["smoke"]["env"]["runtime"][name] = value
    with pytest.raises(SpecError, match=f"search path {name} holds"):
        load_data(data)


def test_search_paths_and_build_knobs_are_allowed():
    from megacpp_env.spec import envpolicy

    for name, value in [
        ("LD_LIBRARY_PATH", "/usr/local/cuda/lib64"),
        ("PATH", "/opt/venv/bin:/usr/bin"),
        ("CC", "gcc-15"),
        ("CFLAGS", "-O2"),
        ("MAX_JOBS", "8"),
    ]:
        assert envpolicy.refusal(name, value) == ("", ""), name
