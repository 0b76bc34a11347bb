"""``facts extract``/``check``/``show``: static reads of real git repositories made here (setup.py and
pyproject projects, CMake fetches, a submodule with a CUTLASS version.h, an sdist, a wheel), the
verification rules, the committed file's round trip, and -- when ../shared/sources is there -- the
committed facts of the real pinned sources re-extracted byte for byte."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from megacpp_env import git
from megacpp_env.cli import main
from megacpp_env.errors import InputError, RefusedError, VerificationError
from megacpp_env.facts.extract import ExtractRequest, extract
from megacpp_env.facts.model import FactsFormatError
from megacpp_env.facts.store import read_facts, render_facts, write_facts
from tests.fixtures.git_repos import FILE_OK, commit_all, make_repo, write_files
from tests.fixtures.index import make_wheel
from tests.fixtures.spec import REPO_ROOT

SETUP_PY = '''\
import os
from pathlib import Path
from setuptools import setup, find_packages
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

this_dir = os.path.dirname(os.path.abspath(__file__))
PACKAGE_NAME = "demo_ext"
LOCAL = "DEMO_LOCAL_VERSION"
FORCE_BUILD = os.getenv("DEMO_FORCE_BUILD", "FALSE") == "TRUE"


def _flag(name):
    return os.environ.get(name, "")


LEGACY = _flag("DEMO_LEGACY")


def append_nvcc_threads(args):
    return args + ["--threads", "4"]


cc_flag = ["-gencode", "arch=compute_90,code=sm_90", "-gencode", "arch=compute_121,code=sm_121"]


def get_package_version():
    with open(Path(this_dir) / PACKAGE_NAME / "__init__.py") as f:
        text = f.read()
    return text + os.environ.get(LOCAL, "")


setup(
    name=PACKAGE_NAME,
    version=get_package_version(),
    packages=find_packages(exclude=("tests",)),
    ext_modules=[CUDAExtension(name="demo_ext_cuda", sources=[])],
    install_requires=["torch", "packaging"],
    extras_require={"dev": ["pytest"]},
    python_requires=">=3.9",
)
'''
SETUP_FILES = {
    "setup.py": SETUP_PY,
    "demo_ext/__init__.py": '__version__ = "1.2.3"\n',
    "tests/__init__.py": "",
    "pyproject.toml": '[build-system]\nrequires = ["setuptools", "wheel", "torch"]\nbuild-backend = "setuptools.build_meta"\n',
}
PYPROJECT_B = '''\
[project]
name = "demo-b"
dynamic = ["version", "dependencies"]
requires-python = ">=3.10"

[project.optional-dependencies]
cu13 = ["demo-dsl[cu13]>=4.5"]

[build-system]
requires = ["setuptools>=77", "packaging>=24"]
build-backend = "backend"
backend-path = ["."]

[tool.setuptools]
py-modules = ["backend"]

[tool.setuptools.dynamic]
version = { attr = "demo_b._meta.__version__" }
dependencies = { file = ["requirements.txt"] }

[tool.setuptools.packages.find]
include = ["demo_b*"]
'''
CMAKE_B = '''\
find_package(Torch REQUIRED)
set(CUTLASS_REVISION "v4.4.2")  # keep in sync
if (DEFINED ENV{DEMO_CUTLASS_SRC_DIR})
  set(DEMO_CUTLASS_SRC_DIR $ENV{DEMO_CUTLASS_SRC_DIR})
endif()
if(DEMO_CUTLASS_SRC_DIR)
  FetchContent_Declare(cutlass SOURCE_DIR ${DEMO_CUTLASS_SRC_DIR})
else()
  FetchContent_Declare(
      cutlass
      GIT_REPOSITORY https://example.invalid/cutlass.git
      GIT_TAG ${CUTLASS_REVISION}
      GIT_SHALLOW TRUE
  )
endif()
'''
CUTLASS_H = "#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR 3\n#define CUTLASS_PATCH 0\n"


def request(path: Path, commit: str, **kw) -> ExtractRequest:
    return ExtractRequest(source="demo", commit=commit, origin=path, **kw)


@pytest.fixture
def setup_repo(tmp_path):
    path = tmp_path / "demo"
    return path, make_repo(path, SETUP_FILES)


@pytest.fixture
def pyproject_repo(tmp_path):
    sub = tmp_path / "cutlass"
    make_repo(sub, {"include/cutlass/version.h": CUTLASS_H})
    path = tmp_path / "demo-b"
    files = {
        "pyproject.toml": PYPROJECT_B,
        "requirements.txt": "-r requirements/common.txt\nclick  # a comment\n--extra-index-url https://example.invalid/\n",
        "requirements/common.txt": "numpy>=2\n",
        "version.txt": "0.4.0\n",
        "backend.py": "import os\nfrom setuptools.build_meta import *\nSUFFIX = os.environ.get('DEMO_B_DEV_SUFFIX', '')\n",
        "demo_b/__init__.py": "",
        "CMakeLists.txt": CMAKE_B,
    }
    commit = make_repo(path, files, submodules={"third/cutlass": f"file://{sub}"})
    return path, commit


def test_setup_py_project(setup_repo):
    path, commit = setup_repo
    f = extract(request(path, commit))
    d = f.distribution
    assert f.verified and f.read_from.kind == "git" and f.read_from.head == commit
    assert (d.name, d.version, d.requires_python) == ("demo_ext", "1.2.3", ">=3.9")
    assert d.version_from == "demo_ext/__init__.py:1 (via setup.py:34 get_package_version())"
    assert (d.requires, d.requires_from) == (("torch", "packaging"), "setup.py:37 install_requires")
    assert d.extras == {"dev": ("pytest",)} and d.imports == ("demo_ext", "demo_ext_cuda")
    assert d.build_requires == ("setuptools", "wheel", "torch")
    env = {e.name: e for e in f.env}
    assert sorted(env) == ["DEMO_FORCE_BUILD", "DEMO_LEGACY", "DEMO_LOCAL_VERSION"]
    assert (env["DEMO_FORCE_BUILD"].at, env["DEMO_FORCE_BUILD"].defaults, env["DEMO_FORCE_BUILD"].compared) == (
        ("setup.py:9",), ("FALSE",), ("TRUE",)
    )
    assert env["DEMO_LEGACY"].at == ("setup.py:16",)  # through the helper that reads its parameter
    assert env["DEMO_LOCAL_VERSION"].at == ("setup.py:29",)  # a module constant names it
    assert f.arch.gencode == ("arch=compute_90,code=sm_90", "arch=compute_121,code=sm_121")
    assert (f.arch.nvcc_threads, f.arch.nvcc_threads_at) == (4, "setup.py:20")
    assert [t.name for t in f.tools] == ["torch.utils.cpp_extension"]


def test_compile_units_and_a_jobs_division_are_facts(tmp_path):
    # the jobs formula's inputs: the files each extension compiles, and vLLM-style `jobs // nvcc_threads`
    setup_py = SETUP_PY.replace(
        'sources=[])', 'sources=["csrc/a.cpp", "csrc/b.cu", "csrc/c.cu", "README.md"])'
    ).replace(
        "def get_package_version():",
        "def compute_num_jobs(num_jobs, nvcc_threads):\n    return max(1, num_jobs // nvcc_threads)\n\n\n"
        "def get_package_version():",
    )
    path = tmp_path / "units"
    f = extract(request(path, make_repo(path, {**SETUP_FILES, "setup.py": setup_py})))
    assert (f.arch.compile_units, f.arch.compile_units_at) == (3, ("setup.py:40",))
    assert f.arch.jobs_divided_at == "setup.py:27"
    text = render_facts(f)
    assert "compile_units = 3" in text and 'jobs_divided_at = "setup.py:27"' in text


def test_facts_without_units_write_no_unit_keys(setup_repo):
    path, commit = setup_repo
    f = extract(request(path, commit))
    assert (f.arch.compile_units, f.arch.jobs_divided_at) == (0, "")
    assert "compile_units" not in render_facts(f) and "jobs_divided_at" not in render_facts(f)


def test_pyproject_project_with_cmake_fetch_and_submodule(pyproject_repo):
    path, commit = pyproject_repo
    git.run_git(["submodule", "update", "--init"], path, config=FILE_OK)
    f = extract(request(path, commit))
    d = f.distribution
    assert (d.name, d.version) == ("demo-b", "0.4.0")
    assert d.version_from == "version.txt (attr demo_b._meta.__version__ is generated at build time from it)"
    assert d.requires == ("numpy>=2", "click")  # -r followed in place, comments and options dropped
    assert d.requires_from == "requirements.txt (pyproject.toml [tool.setuptools.dynamic].dependencies; -r followed)"
    assert d.extras == {"cu13": ("demo-dsl[cu13]>=4.5",)} and d.imports == ("backend", "demo_b")
    assert [e.name for e in f.env] == ["DEMO_B_DEV_SUFFIX", "DEMO_CUTLASS_SRC_DIR"]
    assert [(x.name, x.repo, x.ref, x.env, x.at) for x in f.fetches] == [
        ("cutlass", "https://example.invalid/cutlass.git", "v4.4.2", "DEMO_CUTLASS_SRC_DIR", "CMakeLists.txt:9")
    ]
    assert [(t.name, t.at) for t in f.tools] == [("cmake:find_package(Torch)", "CMakeLists.txt:1")]
    sub = f.submodules[0]
    assert (sub.path, sub.populated, sub.url.startswith("file://")) == ("third/cutlass", True, True)
    assert sub.commit == git.gitlinks(path)["third/cutlass"]
    assert [(c.name, c.version, c.at) for c in f.components] == [("cutlass", "4.3.0", "third/cutlass/include/cutlass/version.h")]
    assert f.arch.gencode == ()  # no cpp_extension build here


def test_static_pyproject_dependencies_win_over_setup_py(tmp_path):
    files = {**SETUP_FILES, "pyproject.toml": '[project]\nname = "demo_ext"\ndynamic = ["version"]\n'
             'dependencies = ["torch", "einops"]\n\n[build-system]\nrequires = ["setuptools>=61"]\n'}  # fmt: skip
    path = tmp_path / "demo"
    commit = make_repo(path, files)
    d = extract(request(path, commit)).distribution
    assert (d.requires, d.requires_from) == (("torch", "einops"), "pyproject.toml [project].dependencies")


def test_a_checkout_that_is_not_the_pin_is_refused_or_recorded_unverified(setup_repo):
    path, pin = setup_repo
    write_files(path, {"README.md": "moved\n"})
    head = commit_all(path, "later")
    with pytest.raises(RefusedError, match=f"is at {head[:12]}, the pin of demo is {pin[:12]}"):
        extract(request(path, pin))
    f = extract(request(path, pin, unverified="the pin is gone upstream"))
    assert (f.verified, f.reason, f.commit, f.read_from.head) == (False, "the pin is gone upstream", pin, head)


def test_a_dirty_checkout_is_refused_and_unverified_is_refused_at_the_pin(setup_repo):
    path, pin = setup_repo
    with pytest.raises(RefusedError, match="clean checkout at the pin"):
        extract(request(path, pin, unverified="why"))
    (path / "setup.py").write_text(SETUP_PY.replace('"FALSE"', '"TRUE"'))
    with pytest.raises(RefusedError, match="uncommitted changes"):
        extract(request(path, pin))


def _version_py(version: str, commit_id: str) -> str:
    """What setuptools-scm writes as its version file (the assignments that matter)."""
    return (f"__version__ = version = {version!r}\n__version_tuple__ = version_tuple = (1, 2, 3)\n"
            f"__commit_id__ = commit_id = {commit_id!r}\n")  # fmt: skip


def _sdist(tmp_path: Path, extra: dict[str, str] | None = None) -> Path:
    out = tmp_path / "demo_ext-1.2.3.tar.gz"
    computed = SETUP_PY.replace('install_requires=["torch", "packaging"]', "install_requires=reqs()")
    files = {**SETUP_FILES, "setup.py": computed,
             "PKG-INFO": "Metadata-Version: 2.1\nName: demo_ext\nVersion: 1.2.3\nRequires-Dist: torch==2.13.0\n"
                         "Requires-Dist: pytest; extra == \"dev\"\n", **(extra or {})}  # fmt: skip
    with tarfile.open(out, "w:gz") as tar:
        for rel, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"demo_ext-1.2.3/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


def test_an_sdist_is_read_with_its_pkg_info_and_must_be_unverified(tmp_path):
    sdist = _sdist(tmp_path)
    with pytest.raises(RefusedError, match="holds no commit record"):
        extract(request(sdist, "a" * 40))
    f = extract(request(sdist, "ab" * 20, unverified="the pin is not readable here"))
    assert (f.read_from.kind, f.read_from.path, len(f.read_from.sha256)) == ("sdist", sdist.name, 64)
    assert f.distribution.requires == ("torch==2.13.0",) and f.distribution.extras == {"dev": ("pytest",)}
    assert f.distribution.requires_from == "PKG-INFO Requires-Dist (sdist metadata; setup.py:37 install_requires is computed)"


PIN = "98dff2a81d747d1dba01a47f939f48c3526d4206"


def test_an_sdist_whose_commit_record_names_the_pin_is_verified(tmp_path):
    sdist = _sdist(tmp_path, {"demo_ext/_version.py": _version_py("1.2.3", "g98dff2a81")})
    f = extract(request(sdist, PIN))
    assert f.verified and f.reason == ""
    assert f.read_from.record == "demo_ext/_version.py: version 1.2.3, commit_id g98dff2a81"
    with pytest.raises(RefusedError, match=r"names the pin: drop --unverified"):
        extract(request(sdist, PIN, unverified="habit"))
    written = tmp_path / "facts"
    write_facts(tmp_path, f)
    assert read_facts(written / "demo.toml") == f  # the record survives the file


@pytest.mark.parametrize(
    ("version", "commit_id", "why"),
    [
        ("1.2.3", "g1234567", "commit_id g1234567 is not the pin 98dff2a81d74"),
        ("1.2.3", "g98df", "commit_id 'g98df' is not an abbreviated commit"),
        ("1.2.4.dev3+g98dff2a81", "g98dff2a81", "made past a tag or from a dirty tree"),
        ("1.2.3+d20260909", "g98dff2a81", "made past a tag or from a dirty tree"),
        ("1.2.2", "g98dff2a81", "version 1.2.2 differs from the sdist's PKG-INFO version 1.2.3"),
        ("1.2.3\n[x]", "g98dff2a81", "holds no commit record"),  # not a plain value: no record at all
    ],
)
def test_an_sdist_record_that_does_not_tie_it_to_the_pin_is_refused(tmp_path, version, commit_id, why):
    sdist = _sdist(tmp_path, {"demo_ext/_version.py": _version_py(version, commit_id)})
    with pytest.raises(RefusedError, match="is not tied to the pin") as err:
        extract(request(sdist, PIN))
    assert why in str(err.value)
    assert "\n" not in extract(request(sdist, PIN, unverified="near the pin")).read_from.record
    assert not extract(request(sdist, PIN, unverified="a release near the pin")).verified


def test_requirements_a_shipped_file_lists_but_install_requires_drops_are_recorded(tmp_path):
    reqs = {"requirements/common.txt": "packaging\n", "requirements/cuda.txt": "-r common.txt\n"
            "--extra-index-url https://example.invalid/whl/\ntorch==2.13.0\ndemo-cubin==1.2.3  # dropped\n"}  # fmt: skip
    sdist = _sdist(tmp_path, reqs)
    f = extract(request(sdist, PIN, unverified="no record", listed_requirements_files=("requirements/cuda.txt",)))
    assert f.distribution.requires == ("torch==2.13.0",)
    assert f.distribution.dropped == ("packaging", "demo-cubin==1.2.3")
    assert f.distribution.dropped_from.startswith("requirements/cuda.txt (-r followed) list them; PKG-INFO")
    (tmp_path / "host.txt").write_text("secret-package\n")
    hostile = _sdist(tmp_path, {"requirements/cuda.txt": f"-r {tmp_path / 'host.txt'}\n"})
    with pytest.raises(InputError, match=r"host.txt.*leaves the tree"):
        extract(request(hostile, PIN, unverified="no record", listed_requirements_files=("requirements/cuda.txt",)))


REGISTRY_PY = """\
import sys
_TEXT = {"LlamaForCausalLM": ("llama", "LlamaForCausalLM"), "Qwen3_5ForCausalLM": ("qwen3_5", "Q")}
_MM: dict[str, tuple[str, str]] = {"LlavaForConditionalGeneration": ("llava", "L")}
_UNLISTED = {"NotServed": ("x", "X")}
_VLLM_MODELS = {**_TEXT, **_MM, "Extra": ("e", "E")}
"""


def test_a_vllm_style_model_registry_is_read_statically(tmp_path):
    sdist = _sdist(tmp_path, {"vllm/model_executor/models/registry.py": REGISTRY_PY})
    f = extract(request(sdist, PIN, unverified="no record"))
    assert f.models == ("Extra", "LlamaForCausalLM", "LlavaForConditionalGeneration", "Qwen3_5ForCausalLM")
    assert f.models_at == "vllm/model_executor/models/registry.py:5 _VLLM_MODELS"
    (tmp_path / "plain").mkdir()
    assert "models" not in extract(request(_sdist(tmp_path / "plain"), PIN, unverified="no record")).to_dict()


def test_a_wheel_adds_its_metadata_and_must_match(setup_repo, tmp_path):
    path, pin = setup_repo
    wheel = make_wheel(tmp_path / "w", "demo_ext", "1.2.3+cu132", requires=("torch>=2.4", "packaging", 'pytest; extra == "dev"'))
    f = extract(request(path, pin, wheel=wheel))
    assert f.distribution.wheel is not None
    assert f.distribution.runtime_requires == ("torch>=2.4", "packaging")
    assert f.distribution.wheel.extras == {"dev": ("pytest",)} and f.distribution.requires == ("torch", "packaging")
    other = make_wheel(tmp_path / "o", "other", "1.0")
    with pytest.raises(VerificationError, match=r"is other 1\.0, but the source at the pin builds demo_ext 1\.2\.3"):
        extract(request(path, pin, wheel=other))


def test_written_facts_read_back_equal_and_are_not_rewritten(setup_repo, tmp_path):
    path, pin = setup_repo
    f = extract(request(path, pin, command="megacpp-env facts extract demo --from CHECKOUT"))
    assert write_facts(tmp_path, f) is True
    assert write_facts(tmp_path, f) is False
    back = read_facts(tmp_path / "facts" / "demo.toml")
    assert back == f and render_facts(back) == (tmp_path / "facts" / "demo.toml").read_text()


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("schema_version = 1\n", "verified: missing (expected a boolean)"),
        ("[[[", "not valid TOML"),
        ('schema_version = 1\nverified = true\nsource = "x"\ncommit = "c"\n[read_from]\nkind = "svn"\n',
         "read_from.kind: unknown kind 'svn' (known: git, sdist, dir)"),
    ],
)
def test_a_malformed_facts_file_names_file_and_key(tmp_path, text, where):
    path = tmp_path / "facts" / "x.toml"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(FactsFormatError) as info:
        read_facts(path)
    assert str(info.value).startswith(f"{path}: ") and where in str(info.value)


def test_unverified_facts_need_a_reason(setup_repo, tmp_path):
    path, pin = setup_repo
    f = extract(request(path, pin))
    write_facts(tmp_path, f)
    target = tmp_path / "facts" / "demo.toml"
    target.write_text(target.read_text().replace("verified = true", "verified = false"))
    with pytest.raises(FactsFormatError, match="reason: unverified facts must say why"):
        read_facts(target)


# ---- the verb, on a copy of the repository's spec ---------------------------------------------------


def test_the_verb_extracts_shows_and_checks(tmp_path, capsys):
    smoke = REPO_ROOT / "sources" / "megacpp-smoke-ext"
    spec_dir = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "facts", spec_dir / "facts")
    shutil.copy(REPO_ROOT / "stack.yaml", spec_dir / "stack.yaml")
    env = {"MEGACPP_GIT_ROOT": str(tmp_path / "git")}
    subprocess.run(["bash", str(REPO_ROOT / "scripts" / "smoke-source.sh")], check=True, capture_output=True,
                   env={**__import__("os").environ, **env, "MEGACPP_SMOKE_SRC": str(smoke)})  # fmt: skip
    checkout = tmp_path / "smoke-ext"
    git.run_git(["clone", "--quiet", str(tmp_path / "git" / "megacpp-smoke-ext.git"), str(checkout)], config=FILE_OK)
    (spec_dir / "facts" / "megacpp_smoke_ext.toml").unlink()
    spec = str(spec_dir / "stack.yaml")
    assert main(["facts", "check", "--spec", spec]) == 1
    assert "missing: megacpp_smoke_ext: no facts/megacpp_smoke_ext.toml" in capsys.readouterr().out
    assert main(["facts", "extract", "megacpp_smoke_ext", "--from", str(checkout), "--spec", spec]) == 0
    assert capsys.readouterr().out == "wrote: facts/megacpp_smoke_ext.toml: megacpp-smoke-ext 0.1.0 at 5988f08f9d84\n"
    # the command recorded in the file names no path of this machine, and the file is the committed one
    assert (spec_dir / "facts" / "megacpp_smoke_ext.toml").read_bytes() == (REPO_ROOT / "facts" / "megacpp_smoke_ext.toml").read_bytes()
    assert main(["facts", "check", "--json", "--spec", spec]) == 0
    report = json.loads(capsys.readouterr().out)
    states = {f["source"]: f["state"] for f in report["facts"]}
    assert report["ok"] and set(states.values()) == {"ok"}  # every shipped source verified (vllm_cutlass: one declared absent file)
    assert main(["facts", "show", "causal_conv1d", "--json", "--spec", spec]) == 0
    assert json.loads(capsys.readouterr().out)["distribution"]["version"] == "1.6.1"


# ---- the real pinned sources, when ../shared/sources is beside the repository -------------------------


def _shared_sources() -> Path | None:
    for parent in REPO_ROOT.parents:
        candidate = parent / "shared" / "sources"
        if (candidate / "README.md").is_file():
            return candidate
    return None


@pytest.mark.parametrize(("source", "bundle"), [("causal_conv1d", "causal-conv1d.bundle"), ("mamba_ssm", "mamba.bundle"),
                                                ("megatron_lm", "megatron.git.tar")])  # fmt: skip
def test_committed_facts_are_what_extract_reads_at_the_pin(tmp_path, capsys, source, bundle):
    shared = _shared_sources()
    if shared is None:
        pytest.skip("no shared/sources beside the repository (the pinned upstream bundles)")
    checkout = tmp_path / "checkout"
    if bundle.endswith(".tar"):
        with tarfile.open(shared / bundle) as tar:
            tar.extractall(tmp_path / "bare", filter="data")
        origin = next((tmp_path / "bare").iterdir())
        git.run_git(["clone", "--quiet", str(origin), str(checkout)], config=FILE_OK)
    else:
        git.run_git(["clone", "--quiet", "-b", "pin", str(shared / bundle), str(checkout)], config=FILE_OK)
    spec_dir = tmp_path / "repo"
    spec_dir.mkdir()
    shutil.copy(REPO_ROOT / "stack.yaml", spec_dir / "stack.yaml")
    assert main(["facts", "extract", source, "--from", str(checkout), "--spec", str(spec_dir / "stack.yaml")]) == 0
    assert capsys.readouterr().out.startswith(f"wrote: facts/{source}.toml")
    assert (spec_dir / "facts" / f"{source}.toml").read_text() == (REPO_ROOT / "facts" / f"{source}.toml").read_text()


def test_committed_vllm_facts_are_what_extract_reads_from_the_pypi_sdist(tmp_path, capsys, vllm_sdist):
    """facts/vllm.toml was read from vLLM 0.29.0's PyPI sdist (sha256 in the file; 40 MB, not carried in
    the repository: tests/fixtures/upstream.py downloads it once into the ignored .megacpp/upstream/, or
    MEGACPP_VLLM_SDIST names a copy), verified by its own commit record."""
    sdist = vllm_sdist
    spec_dir = tmp_path / "repo"
    spec_dir.mkdir()
    shutil.copy(REPO_ROOT / "stack.yaml", spec_dir / "stack.yaml")
    argv = ["facts", "extract", "vllm", "--from", str(sdist), "--build-requirements", "requirements/build/cuda.txt",
            "--listed-requirements", "requirements/cuda.txt", "--spec", str(spec_dir / "stack.yaml")]  # fmt: skip
    assert main(argv) == 0
    assert capsys.readouterr().out == "wrote: facts/vllm.toml: vllm 0.29.0 at 98dff2a81d74\n"
    assert (spec_dir / "facts" / "vllm.toml").read_text() == (REPO_ROOT / "facts" / "vllm.toml").read_text()


def _sparse_without(path: Path, left_out: str) -> None:
    git.run_git(["config", "core.sparseCheckout", "true"], path)
    (path / ".git" / "info").mkdir(exist_ok=True)
    (path / ".git" / "info" / "sparse-checkout").write_text(f"/*\n!/{left_out}\n")
    git.run_git(["read-tree", "-mu", "HEAD"], path)
    assert not (path / left_out).exists()


def test_a_sparse_checkout_may_leave_out_only_declared_paths(tmp_path):
    """A declared exception (`unobtainable`: an object that cannot be had) may be absent from the tree
    the facts are read from, and the facts say so (read_from.absent); anything else a sparse checkout
    leaves out is not the pinned tree, so extraction refuses it (a clean `git status` would hide it)."""
    path = tmp_path / "demo"
    commit = make_repo(path, {**SETUP_FILES, "docs/img.png": "png\n"})
    _sparse_without(path, "docs/img.png")
    f = extract(request(path, commit, unobtainable=("docs/img.png",)))
    assert f.verified and f.read_from.absent == ("docs/img.png",)
    assert f.read_from.to_dict()["absent"] == ["docs/img.png"]
    with pytest.raises(RefusedError, match=r"leaves out docs/img.png, which sources.demo.unobtainable does not"):
        extract(request(path, commit))
    _sparse_without(path, "setup.py")
    with pytest.raises(RefusedError, match=r"leaves out setup.py"):
        extract(request(path, commit, unobtainable=("docs/img.png",)))
