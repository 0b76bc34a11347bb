"""The post-install dependency check (python -m megacpp_env.depcheck) on real wheels installed into a
real venv: it finds what pip check finds, and accepts exactly the declared resolutions."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import sysconfig

import pytest

from megacpp_env.depcheck import Accepted, Resolutions, check, installed, main, read_resolutions
from megacpp_env.errors import FormatError
from tests.fixtures.index import make_wheel

WHEELS = [
    ("torch", "2.13.0.dev20261101+cu132", ("pytorch-triton==3.7.0+git8f3a4b2c; platform_system == \"Linux\"",)),
    ("pytorch-triton", "3.7.0+git8f3a4b2c", ()),
    ("mamba-ssm", "2.3.2.post1", ("torch", "triton>=3.5.0", "tilelang==0.1.8", 'causal-conv1d>=1.2.0; extra == "causal-conv1d"')),
    ("tilelang", "0.1.8", ("apache-tvm-ffi~=0.1.0",)),
    ("apache-tvm-ffi", "0.1.9", ()),
    ("vllm", "0.28.1.dev0+gbf8e762.cu132", ("tilelang==0.1.12", "pynvvideocodec==2.0.4", "xgrammar>=0.2.1")),
    ("xgrammar", "0.2.8", ("apache-tvm-ffi>=0.1.11", 'triton; platform_system == "Linux"')),
    ("other", "1.0", ("tilelang>=0.1.10",)),
]
TRITON_OVERRIDE = Accepted(requirement="triton ; sys_platform == 'never'", reason="pytorch-triton", requirers=("mamba-ssm", "xgrammar"))
DECLARED = Resolutions(
    target="gb10",
    overrides=(
        TRITON_OVERRIDE,
        Accepted(requirement="tilelang==0.1.8", reason="candidate A", requirers=("vllm",)),
        Accepted(requirement="apache-tvm-ffi==0.1.9", reason="candidate A", requirers=("vllm", "xgrammar")),
        Accepted(requirement="pynvvideocodec ; sys_platform == 'never'", reason="no video", requirers=("vllm",)),
    ),
    provides=(("pytorch-triton", "triton", "the nightly's triton"),),
)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A venv holding the wheels above, installed by pip (no dependencies resolved)."""
    root = tmp_path_factory.mktemp("depcheck")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    wheels = [make_wheel(root / "wheels", n, v, requires=r) for n, v, r in WHEELS]
    python = root / "venv" / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                    *map(str, wheels)], check=True, capture_output=True)  # fmt: skip
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    return python, purelib


def pip_check_pairs(python) -> set[tuple[str, str]]:
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "check"], capture_output=True, text=True,
                          check=False)  # fmt: skip
    pairs = set()
    for line in proc.stdout.splitlines():
        m = re.match(r"(\S+) \S+ (?:requires|has requirement) ([A-Za-z0-9_.-]+)", line)
        if m:
            pairs.add((m.group(1).lower(), m.group(2).lower().replace("_", "-")))
    return pairs


def test_it_finds_what_pip_check_finds(venv):
    python, purelib = venv
    report = check(installed([purelib]), Resolutions())
    ours = {(f.requirer.split()[0], re.split(r"[<>=!~; \[]", f.requirement)[0].lower()) for f in report.failing}
    assert ours == pip_check_pairs(python) and len(ours) == 6
    assert not report.ok


def test_declared_resolutions_accept_exactly_their_requirers(venv):
    _python, purelib = venv
    report = check(installed([purelib]), DECLARED)
    failing = [f.line() for f in report.failing]
    # "other" is not among the tilelang override's requirers: its violated requirement still fails
    assert failing == ["conflict: other 1.0 requires tilelang>=0.1.10: 0.1.8 is installed"]
    accepted = sorted((f.requirer, f.accepted_by.split(":")[0].split(" (")[0]) for f in report.findings if f.accepted_by)
    assert accepted == [
        ("mamba-ssm 2.3.2.post1", "provides"),
        ("vllm 0.28.1.dev0+gbf8e762.cu132", "override pynvvideocodec; sys_platform == \"never\""),
        ("vllm 0.28.1.dev0+gbf8e762.cu132", "override tilelang==0.1.8"),
        ("xgrammar 0.2.8", "override apache-tvm-ffi==0.1.9"),
        ("xgrammar 0.2.8", "provides"),  # its triton requirement, met by pytorch-triton
    ]


def test_a_provider_next_to_what_it_provides_fails(venv, tmp_path):
    _python, purelib = venv
    env = installed([purelib])
    env["triton"] = type(env["tilelang"])(name="triton", version="3.7.1", requires=())
    report = check(env, DECLARED)
    assert any(f.problem == "both installed" and f.requirement == "triton" for f in report.failing)


def test_cli_with_a_rendered_resolutions_file(venv, tmp_path, capsys):
    _python, purelib = venv
    path = tmp_path / "resolutions.json"
    path.write_text(json.dumps(DECLARED.to_dict()))
    assert read_resolutions(path) == DECLARED
    assert main(["--resolutions", str(path), "--path", purelib]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "depcheck: 1 problem(s)"
    assert "accepted (provides: pytorch-triton 3.7.0+git8f3a4b2c provides triton): mamba-ssm 2.3.2.post1 requires triton>=3.5.0" in out
    assert main(["--resolutions", str(tmp_path / "none.json"), "--path", purelib]) == 2
    path.write_text(json.dumps({**DECLARED.to_dict(), "overrides": [{"requirement": "x >>> 1", "reason": "r"}]}))
    with pytest.raises(FormatError, match=r"overrides\[0\]\.requirement: invalid requirement"):
        read_resolutions(path)


def test_the_tool_venv_itself_is_clean(capsys):
    assert main(["--path", sysconfig.get_paths()["purelib"]]) == 0
