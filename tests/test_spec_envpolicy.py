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
    # issue 31: they load code too
    "PYTHONWARNINGS", "CMAKE_TOOLCHAIN_FILE", "CMAKE_PROJECT_INCLUDE", "CMAKE_PROJECT_INCLUDE_BEFORE",
    "CMAKE_PROJECT_demo_INCLUDE", "CMAKE_CXX_COMPILER_LAUNCHER", "CMAKE_CUDA_COMPILER_LAUNCHER",
    "CMAKE_USER_MAKE_RULES_OVERRIDE", "CMAKE_PROJECT_TOP_LEVEL_INCLUDES",
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


# ---- issue 19, item 10: variables that make a tool load a file it names -----------------------------

FILE_LOADING = [
    "OPENSSL_CONF", "HOME", "XDG_CONFIG_HOME", "PIP_CONFIG_FILE", "ZDOTDIR", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    # siblings
    "XDG_DATA_DIRS", "GIT_DIR", "GIT_OBJECT_DIRECTORY", "PIP_INDEX_URL", "UV_CONFIG_FILE", "UV_INDEX_URL",
    "MAKEFILES", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_HOME", "NETRC", "OPENSSL_MODULES", "GNUPGHOME",
    "DOCKER_CONFIG", "pip_config_file",
]  # fmt: skip


@pytest.mark.parametrize("name", FILE_LOADING)
@pytest.mark.parametrize("where", ["env.build", "env.runtime", "build_env", "env.sources"])
def test_file_loading_variables_are_refused_with_file_line_key_and_remedy(stack_data, name, where, tmp_path):
    from megacpp_env.spec import load_spec

    data = copy.deepcopy(stack_data)
    if where == "build_env":
        data["sources"]["megacpp_smoke_ext"]["build_env"][name] = "/tmp/evil.cnf"
        key = f"sources.megacpp_smoke_ext.build_env.{name}"
    elif where == "env.sources":
        data["targets"]["smoke"]["env"].setdefault("sources", {}).setdefault("megacpp_smoke_ext", {})[name] = "/x"
        key = f"targets.smoke.env.sources.megacpp_smoke_ext.{name}"
    else:
        section = where.split(".")[1]
        data["targets"]["smoke"].setdefault("env", {}).setdefault(section, {})[name] = "/tmp/evil.cnf"
        key = f"targets.smoke.{where}.{name}"
    with pytest.raises(SpecError, match=f"{name} is refused: it makes a tool load a configuration file") as exc:
        load_data(data)
    assert exc.value.key == key
    assert "compiler or CUDA knob" in exc.value.remedy
    # from a file: the message names file and line
    import yaml

    path = tmp_path / "stack.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    assert str(exc.value).startswith(f"{path}:{exc.value.line}: {key}: {name} is refused") and exc.value.line > 0
    assert str(exc.value).endswith(f"(remedy: {exc.value.remedy})")


def test_the_shipped_build_knobs_stay_allowed():
    from megacpp_env.spec import envpolicy

    for name in [
        "CMAKE_ARGS",
        "NVCC_APPEND_FLAGS",
        "TORCH_CUDA_ARCH_LIST",
        "SETUPTOOLS_SCM_PRETEND_VERSION",
        "CAUSAL_CONV1D_FORCE_BUILD",
        "FLASHINFER_CUDA_ARCH_LIST",
        "TRITON_PTXAS_PATH",
        "CUDA_HOME",
    ]:
        assert envpolicy.refusal(name, "/usr/local/cuda") == ("", ""), name


def test_build_variables_of_a_source_without_facts_are_an_allowlist(tmp_path):
    """Issue 19, item 10: with no facts to say what the build reads, only compiler and CUDA knobs pass."""
    import shutil

    from megacpp_env import rules
    from megacpp_env.spec import load_spec
    from tests.fixtures.spec import REPO_ROOT

    shutil.copytree(REPO_ROOT / "facts", tmp_path / "facts")
    (tmp_path / "facts" / "megacpp_smoke_ext.toml").unlink()
    anchor = '      MEGACPP_SMOKE_EXT_FORCE_BUILD: "TRUE"\n'
    text = (REPO_ROOT / "stack.yaml").read_text()
    extra = '      NVCC_APPEND_FLAGS: "-lineinfo"\n      CMAKE_BUILD_TYPE: Release\n      SOME_TOOL_SETTING: "1"\n'
    (tmp_path / "stack.yaml").write_text(text.replace(anchor, anchor + extra, 1))
    spec = load_spec(tmp_path / "stack.yaml")
    found = {f.key: f for f in rules.run_rules(spec, only=("UP001",))}
    assert sorted(k for k in found if "megacpp_smoke_ext" in k) == [
        "sources.megacpp_smoke_ext.build_env.MEGACPP_SMOKE_EXT_FORCE_BUILD",
        "sources.megacpp_smoke_ext.build_env.SOME_TOOL_SETTING",
    ]
    f = found["sources.megacpp_smoke_ext.build_env.SOME_TOOL_SETTING"]
    assert "not a compiler or CUDA variable, and no facts/megacpp_smoke_ext.toml says" in f.message
    assert "facts extract megacpp_smoke_ext" in f.remedy


def test_a_stated_reason_admits_a_build_variable_and_must_name_one(tmp_path, stack_data):
    import shutil

    from megacpp_env import rules
    from megacpp_env.spec import load_spec
    from tests.fixtures.spec import REPO_ROOT

    shutil.copytree(REPO_ROOT / "facts", tmp_path / "facts")
    (tmp_path / "facts" / "megacpp_smoke_ext.toml").unlink()
    anchor = '      MEGACPP_SMOKE_EXT_FORCE_BUILD: "TRUE"\n'
    reasons = (
        '    build_env_reasons:\n      MEGACPP_SMOKE_EXT_FORCE_BUILD: "setup.py:12 reads it; facts not '
        'extracted for this test"\n'
    )
    text = (REPO_ROOT / "stack.yaml").read_text().replace(anchor, anchor + reasons, 1)
    (tmp_path / "stack.yaml").write_text(text)
    spec = load_spec(tmp_path / "stack.yaml")
    assert spec.sources["megacpp_smoke_ext"].build_env_reasons == {
        "MEGACPP_SMOKE_EXT_FORCE_BUILD": "setup.py:12 reads it; facts not extracted for this test"
    }
    assert not [f for f in rules.run_rules(spec, only=("UP001",)) if "megacpp_smoke_ext" in f.key]
    data = copy.deepcopy(stack_data)
    data["sources"]["megacpp_smoke_ext"]["build_env_reasons"] = {"NOT_SET_HERE": "why"}
    with pytest.raises(SpecError, match="NOT_SET_HERE is not set in build_env") as exc:
        load_data(data)
    assert exc.value.key == "sources.megacpp_smoke_ext.build_env_reasons.NOT_SET_HERE"


@pytest.mark.parametrize(
    "value",
    [
        "-DCMAKE_TOOLCHAIN_FILE=/tmp/evil.cmake", "-G Ninja -DCMAKE_TOOLCHAIN_FILE:FILEPATH=/x.cmake",
        "-D CMAKE_PROJECT_INCLUDE=/x.cmake", "-DFOO=1 -C /tmp/init.cmake", "-C/tmp/init.cmake", "-P /x.cmake",
        "--toolchain /x.cmake", "--toolchain=/x.cmake", "-DCMAKE_CUDA_COMPILER_LAUNCHER=/evil",
        "'-DCMAKE_PROJECT_INCLUDE_BEFORE=/x y.cmake'",
    ],
)  # fmt: skip
@pytest.mark.parametrize("name", ["CMAKE_ARGS", "SKBUILD_CMAKE_ARGS"])
def test_cmake_arguments_that_load_code_are_refused(stack_data, name, value):
    data = copy.deepcopy(stack_data)
    data["sources"]["megacpp_smoke_ext"]["build_env"][name] = value
    with pytest.raises(SpecError, match=f"{name} holds .*which makes CMake load code") as exc:
        load_data(data)
    assert "overlay" in exc.value.remedy


def test_ordinary_cmake_arguments_stay_allowed():
    from megacpp_env.spec import envpolicy

    for value in ["-DFETCHCONTENT_FULLY_DISCONNECTED=ON", "-G Ninja -DCMAKE_BUILD_TYPE=Release",
                  "-DCMAKE_CUDA_ARCHITECTURES=90a -DCUTLASS_NVCC_ARCHS=90a", "-DCMAKE_PREFIX_PATH=/opt/x"]:  # fmt: skip
        assert envpolicy.refusal("CMAKE_ARGS", value) == ("", ""), value
