"""``lock`` around the resolver, against the local indexes: conflicts between requirers refuse the lock
before uv runs, a resolver failure names its requirers, and a package of an explicit index that was
resolved from anywhere else (an override bypasses the index) refuses the lock."""

from __future__ import annotations

from megacpp_env import layout, uv
from megacpp_env.cli import main
from megacpp_env.facts.model import Distribution, ReadFrom, SourceFacts
from megacpp_env.facts.store import write_facts
from tests.fixtures.index import write_lock_spec

COMMIT = "5a1f0c3e9b7d2a4c6e8f0b1d3a5c7e9f2b4d6a8c"
SOURCE = f"""sources:
  demo:
    repo: https://example.invalid/demo.git
    commit: "{COMMIT}"
"""


def spec_with_source(uv_offline_env, tmp_path, requires, stack='["torch>=2.13.0.dev0,<2.14", fastpath, numpy]',
                     resolutions=""):  # fmt: skip
    path = write_lock_spec(tmp_path / "repo", uv_offline_env.nightly.url, stack=stack)
    text = path.read_text().replace("sources: {}\n", SOURCE).replace("    requirements: " + stack,
                                                                    "    requirements: " + stack + resolutions, 1)
    text = text.replace("  gpu:\n    description", "  gpu:\n    sources: [demo]\n    description", 1)
    path.write_text(text)
    dist = Distribution(name="demo", version="1.0", requires=tuple(requires), requires_from="setup.py:9 install_requires")
    facts = SourceFacts(source="demo", commit=COMMIT, verified=True, read_from=ReadFrom(kind="git", head=COMMIT),
                        command="megacpp-env facts extract demo --from CHECKOUT", distribution=dist)  # fmt: skip
    write_facts(path.parent, facts)
    return path


def test_a_conflict_between_requirers_refuses_before_uv_runs(uv_offline_env, tmp_path, capsys):
    spec = spec_with_source(uv_offline_env, tmp_path, ["numpy==2.4.6"], stack='["torch>=2.13.0.dev0,<2.14", numpy==2.5.5]')
    uv.COMMANDS.clear()
    rc = main(["lock", "resolve", "gpu", "--spec", str(spec)])
    out = capsys.readouterr().out
    assert rc == 1 and uv.COMMANDS == []
    assert out.splitlines() == [
        "error: gpu: conflict: numpy: target gpu requires numpy==2.5.5 (stack.yaml targets.gpu.requirements[1]) but "
        "demo requires numpy==2.4.6 (facts/demo.toml: setup.py:9 install_requires) [linux/arm64] (remedy: change one "
        'of the pins, or declare a reviewed resolution under targets.gpu.resolutions.overrides (requirement: "numpy...", '
        "reason: why both requirers work with it))",
        "lock: nothing written",
    ]
    assert not (spec.parent / "locks").exists()


def test_a_declared_override_resolves_it_and_reaches_uv(uv_offline_env, tmp_path, capsys):
    resolutions = ("\n    resolutions:\n      overrides:\n        - requirement: numpy==2.4.6\n"
                   "          reason: demo is tested with 2.4 only")  # fmt: skip
    spec = spec_with_source(uv_offline_env, tmp_path, ["numpy==2.4.6"], stack='["torch>=2.13.0.dev0,<2.14", numpy==2.5.5]',
                            resolutions=resolutions)  # fmt: skip
    uv.COMMANDS.clear()
    assert main(["lock", "resolve", "gpu", "--spec", str(spec)]) == 0, capsys.readouterr().out
    compiles = [argv for argv in uv.COMMANDS if argv[1:3] == ("pip", "compile")]
    assert compiles and all(argv[argv.index("--overrides") + 1] == "overrides.txt" for argv in compiles)
    from megacpp_env.lock.pylock import read_pylock

    lock = read_pylock(layout.lock_path(spec.parent, "gpu", "linux/arm64"))
    assert lock.by_name()["numpy"].version == "2.4.6" and "demo" not in lock.by_name()


def test_a_resolver_failure_names_its_requirers(uv_offline_env, tmp_path, capsys):
    spec = spec_with_source(uv_offline_env, tmp_path, ["fastpath>=9"])
    rc = main(["lock", "resolve", "gpu", "--spec", str(spec)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "required by:\n  gpu: target gpu requires fastpath (stack.yaml targets.gpu.requirements[1])\n" \
           "  gpu: demo requires fastpath>=9 (facts/demo.toml: setup.py:9 install_requires)" in err  # fmt: skip


def test_an_override_on_an_explicit_index_package_is_caught_after_resolution(uv_offline_env, tmp_path, capsys):
    resolutions = ("\n    resolutions:\n      overrides:\n        - requirement: torch>=2.13.0.dev0\n"
                   "          reason: wrongly meant to widen torch")  # fmt: skip
    spec = spec_with_source(uv_offline_env, tmp_path, [], resolutions=resolutions)
    rc = main(["lock", "resolve", "gpu", "--spec", str(spec)])
    out = capsys.readouterr().out
    assert rc == 1 and out.endswith("lock: nothing written\n")
    # uv took the override without the explicit index: the default index's torch 99.0 (the bait)
    assert f"error: gpu linux/arm64: torch was resolved to {uv_offline_env.pypi.url.removesuffix('/simple')}/files/" \
           f"torch-99.0-py3-none-manylinux_2_28_aarch64.whl, not from its explicit index {uv_offline_env.nightly.url}" in out  # fmt: skip
