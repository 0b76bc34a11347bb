"""What the facts read of a CMake download (``megacpp_env/facts/cmake.py``) is what the real CMake does
with it. Each case writes a CMakeLists.txt, reads it with ``scan_cmake``, then runs CMake (PyPI's
``cmake<4``, the test extra) on it against a real repository with nested submodules (served over
file://, no network) and compares:

* the submodules CMake cloned with the ones the recorded ``submodule_mode`` says it clones (no
  ``GIT_SUBMODULES``, one expanding to nothing, ``""`` for FetchContent and for ExternalProject under
  policy CMP0097 OLD and NEW, a list, ``GIT_SUBMODULES_RECURSE OFF``);
* ``cmake_override``: ``-DFETCHCONTENT_SOURCE_DIR_<NAME>=<tree>`` is used by CMake exactly where the facts
  say it is honoured (a ``FetchContent_Declare``), and ignored by a ``FetchContent_Populate`` given its
  own options, which clones even with FETCHCONTENT_FULLY_DISCONNECTED.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from megacpp_env import git
from megacpp_env.facts.cmake import scan_cmake
from tests.fixtures.docker import skip_or_fail
from tests.fixtures.git_repos import FILE_OK, make_repo


def cmake_bin() -> Path:
    """The CMake of PyPI's ``cmake`` package (``cmake<4``: pyproject's test and dev extras)."""
    try:
        import cmake  # type: ignore[import-not-found]
    except ImportError:
        skip_or_fail("no PyPI cmake in this environment (pip install -e '.[test]')")
    return Path(cmake.CMAKE_BIN_DIR) / "cmake"


# every file a clone can hold: the superproject's, a (nested) and b, and a's own submodule
ALL = {"f.txt", "a/f.txt", "a/sub/leaf/f.txt", "b/f.txt"}


@pytest.fixture(scope="module")
def top(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(url, commit) of a repository with submodules ``a`` (itself with ``sub/leaf``) and ``b``."""
    root = tmp_path_factory.mktemp("repos")
    leaf, mid, sup = root / "leaf", root / "mid", root / "top"
    make_repo(leaf, {"f.txt": "leaf\n"})
    make_repo(mid, {"f.txt": "mid\n"}, submodules={"sub/leaf": leaf.as_uri()})
    sha = make_repo(sup, {"f.txt": "top\n"}, submodules={"a": mid.as_uri(), "b": leaf.as_uri()})
    return sup.as_uri(), sha


def run_cmake(project: Path, *args: str, build: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_CONFIG_COUNT": str(len(FILE_OK))}
    for i, (k, v) in enumerate(FILE_OK.items()):  # submodules over file:// (git refuses them by default)
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = k, v
    proc = subprocess.run([str(cmake_bin()), "-S", str(project), "-B", str(project / "b"), *args],
                          capture_output=True, text=True, env=env, check=False)  # fmt: skip
    if proc.returncode == 0 and build:
        proc = subprocess.run([str(cmake_bin()), "--build", str(project / "b")], capture_output=True, text=True,
                              env=env, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def cloned(tree: Path) -> set[str]:
    return {p.relative_to(tree).as_posix() for p in tree.rglob("f.txt")}


def predicted(mode: str, listed: tuple[str, ...], recurse: bool) -> set[str]:
    """The files a clone has when CMake clones what the facts record."""
    if mode == "none":
        return {"f.txt"}
    tops = {"a", "b"} if mode == "all" else set(listed)
    out = {"f.txt"} | {f"{t}/f.txt" for t in tops}
    if recurse and "a" in tops:
        out.add("a/sub/leaf/f.txt")
    return out


def write(project: Path, text: str) -> Path:
    project.mkdir(parents=True, exist_ok=True)
    path = project / "CMakeLists.txt"
    path.write_text(text)
    return path


FETCHCONTENT = """cmake_minimum_required(VERSION 3.26)
project(t LANGUAGES NONE)
include(FetchContent)
set(EMPTY "")
set(SUBS "a;b")
FetchContent_Declare(dep GIT_REPOSITORY {url} GIT_TAG {sha} {options})
FetchContent_MakeAvailable(dep)
"""
EXTERNALPROJECT = """cmake_minimum_required(VERSION {version})
project(t LANGUAGES NONE)
{policy}
include(ExternalProject)
ExternalProject_Add(dep GIT_REPOSITORY {url} GIT_TAG {sha} GIT_SUBMODULES "" SOURCE_DIR ${{CMAKE_BINARY_DIR}}/src
  CONFIGURE_COMMAND "" BUILD_COMMAND "" INSTALL_COMMAND "")
"""


@pytest.mark.parametrize(
    ("options", "mode"),
    [
        ("", "all"),  # no GIT_SUBMODULES: every submodule, recursively
        ('GIT_SUBMODULES ""', "none"),
        ('GIT_SUBMODULES "${EMPTY}"', "none"),  # quoted: one empty element
        ("GIT_SUBMODULES ${EMPTY}", "all"),  # unquoted: expands to nothing, as if the option were not given
        ("GIT_SUBMODULES a", "list"),
        ("GIT_SUBMODULES ${SUBS}", "list"),  # a list variable expands to its elements
        ("GIT_SUBMODULES ${NOT_SET_ANYWHERE}", "unknown"),  # this reading cannot know (UP015 says so)
        ("GIT_SUBMODULES_RECURSE OFF", "all"),
        ("GIT_SUBMODULES a GIT_SUBMODULES_RECURSE FALSE GIT_PROGRESS TRUE", "list"),
    ],
)
def test_fetchcontent_clones_what_the_facts_record(top, tmp_path, options, mode):
    url, sha = top
    path = write(tmp_path / "p", FETCHCONTENT.format(url=url, sha=sha, options=options))
    (hit,) = scan_cmake(path, "CMakeLists.txt").fetches
    assert (hit.command, hit.submodule_mode) == ("FetchContent_Declare", mode)
    run_cmake(tmp_path / "p")
    got = cloned(tmp_path / "p" / "b" / "_deps" / "dep-src")
    if mode == "unknown":
        assert got == ALL  # what CMake did with the unset variable; the facts do not claim to know
    else:
        assert got == predicted(mode, hit.submodules, hit.submodules_recurse)


@pytest.mark.parametrize(
    ("version", "policy", "mode"),
    [
        ("3.15", "", "all"),  # CMP0097 OLD: GIT_SUBMODULES "" still clones every submodule
        ("3.16", "", "none"),  # NEW from 3.16 on
        ("3.10...3.28", "", "none"),  # min...max: policies as of max
        ("3.26", "cmake_policy(SET CMP0097 OLD)", "all"),
        ("3.15", "cmake_policy(SET CMP0097 NEW)", "none"),
    ],
)
def test_externalproject_follows_cmp0097(top, tmp_path, version, policy, mode):
    url, sha = top
    path = write(tmp_path / "p", EXTERNALPROJECT.format(version=version, policy=policy, url=url, sha=sha))
    (hit,) = scan_cmake(path, "CMakeLists.txt").fetches
    assert (hit.command, hit.submodule_mode, hit.cmake_override) == ("ExternalProject_Add", mode, "")
    run_cmake(tmp_path / "p", build=True)
    assert cloned(tmp_path / "p" / "b" / "src") == predicted(mode, (), True)


def test_an_included_file_takes_the_policy_of_the_project_that_includes_it(top, tmp_path):
    """scan_build passes the top-level CMakeLists' cmake_minimum_required to the files under cmake/."""
    url, sha = top
    project = tmp_path / "p"
    write(project, "cmake_minimum_required(VERSION 3.15)\nproject(t LANGUAGES NONE)\ninclude(cmake/dep.cmake)\n")
    (project / "cmake").mkdir()
    dep = project / "cmake" / "dep.cmake"
    dep.write_text(EXTERNALPROJECT.format(version="", policy="", url=url, sha=sha).split("\n", 2)[2])
    top_scan = scan_cmake(project / "CMakeLists.txt", "CMakeLists.txt")
    (hit,) = scan_cmake(dep, "cmake/dep.cmake", policy_version=top_scan.policy_version).fetches
    assert hit.submodule_mode == "all"
    assert scan_cmake(dep, "cmake/dep.cmake").fetches[0].submodule_mode == "unknown"  # no policy known
    run_cmake(project, build=True)
    assert cloned(project / "b" / "src") == ALL


OVERRIDE = """cmake_minimum_required(VERSION 3.26)
project(t LANGUAGES NONE)
include(FetchContent)
{fetch}
message(STATUS "SOURCE_DIR=${{{name}_SOURCE_DIR}}")
"""


@pytest.mark.parametrize(
    ("fetch", "name"),
    [
        # vLLM's vllm_flash_attn.cmake: Declare + MakeAvailable
        ("FetchContent_Declare(vllm-flash-attn GIT_REPOSITORY {url} GIT_TAG {sha})\n"
         "FetchContent_MakeAvailable(vllm-flash-attn)", "vllm-flash-attn"),
        # fmha_sm100.cmake / tml_fa4.cmake: Declare + a one-argument Populate
        ("FetchContent_Declare(fmha_sm100 GIT_REPOSITORY {url} GIT_TAG {sha})\n"
         "FetchContent_GetProperties(fmha_sm100)\nif(NOT fmha_sm100_POPULATED)\n"
         "FetchContent_Populate(fmha_sm100)\nendif()", "fmha_sm100"),
        # deepgemm.cmake / qutlass.cmake: a Populate given its own options
        ("FetchContent_Populate(qutlass SOURCE_DIR ${{CMAKE_BINARY_DIR}}/qsrc GIT_REPOSITORY {url} GIT_TAG {sha})",
         "qutlass"),
    ],
)  # fmt: skip
def test_cmake_honours_its_override_where_the_facts_say(top, tmp_path, fetch, name):
    url, sha = top
    local = tmp_path / "local tree"  # a path with a space: CMake's -D carries it; CMAKE_ARGS would not
    make_repo(local, {"f.txt": "local\n"})
    path = write(tmp_path / "p", OVERRIDE.format(fetch=fetch.format(url=url, sha=sha), name=name))
    (hit,) = scan_cmake(path, "CMakeLists.txt").fetches
    flags = ["-DFETCHCONTENT_FULLY_DISCONNECTED=ON", f"-D{'FETCHCONTENT_SOURCE_DIR_' + name.upper()}={local}"]
    out = run_cmake(tmp_path / "p", *flags).stdout
    used = f"SOURCE_DIR={local}\n" in out
    assert used == bool(hit.cmake_override), out[-1500:]
    if hit.cmake_override:
        assert hit.cmake_override == "FETCHCONTENT_SOURCE_DIR_" + name.upper()
    else:  # ignored, FULLY_DISCONNECTED too: it cloned the repository
        assert (tmp_path / "p" / "b" / "qsrc" / "b" / "f.txt").is_file()
        assert git.head_commit(tmp_path / "p" / "b" / "qsrc") == sha
