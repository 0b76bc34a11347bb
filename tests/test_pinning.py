"""megacpp_env/pinning.py + `pin-base`: the textual spec edit (every YAML form the loader accepts for a
base image), and, against the real loopback registry, pinning the pushed smoke base in a copy of the
spec and catching a tag that moved."""

from __future__ import annotations

import argparse
import json
import re
import uuid
from pathlib import Path

import pytest

from megacpp_env import build, docker, pinning, rules
from megacpp_env.cli import dispatch
from megacpp_env.commands import build as build_cmd
from megacpp_env.commands import pin_base as pin_cmd
from megacpp_env.errors import RefusedError, SpecError, VerificationError
from megacpp_env.registry import RegistryError
from megacpp_env.spec import load_spec
from tests.fixtures.registry import PushedImage, push_local, remove_if_untagged

REPO_ROOT = Path(__file__).resolve().parent.parent
DIGEST = "sha256:" + "c4" * 32
SHIPPED_AMD64 = "      linux/amd64: megacpp-base/debian-forky:amd64\n"
CUDA = "nvidia/cuda:13.2.0-cudnn-devel-ubuntu24.04"


def _spec_file(tmp_path: Path, old: str = "", new: str = "", key: str = "targets.gb10.base_image") -> Path:
    """A copy of the shipped stack.yaml in ``tmp_path``, with ``old`` replaced by ``new`` where the spec's
    ``key`` stands (its line, as the loaded spec knows it: however many other targets name the same image)."""
    shipped = REPO_ROOT / "stack.yaml"
    text = shipped.read_text()
    if old:
        start = sum(map(len, text.splitlines(keepends=True)[: load_spec(shipped).lines[key] - 1]))
        assert text.startswith(old, start), (key, old)
        text = text[:start] + new + text[start + len(old) :]
    path = tmp_path / "stack.yaml"
    path.write_text(text)
    return path


def _pin_all(path: Path, target: str, digest: str = DIGEST) -> tuple[str, str]:
    """Pin every base of ``target`` to ``digest`` as if the registry had said so; (old text, new text)."""
    before = path.read_text()
    spec = load_spec(path)
    results = [pinning.PinResult(entry=e, status=pinning.PINNED, digest=digest)
               for e in pinning.entries(spec, spec.target(target))]
    assert pinning.write_pins(spec, results)
    return before, path.read_text()


def _changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    assert len(a) == len(b)
    return [(x, y) for x, y in zip(a, b, strict=True) if x != y]


def test_entries_follow_the_spec_form():
    spec = load_spec(REPO_ROOT / "stack.yaml")
    smoke = pinning.entries(spec, spec.target("smoke"))
    assert [(e.key, e.line, e.platforms, e.token) for e in smoke] == [
        ("targets.smoke.base_image.linux/amd64", spec.lines["targets.smoke.base_image.linux/amd64"],
         ("linux/amd64",), "linux/amd64"),
        ("targets.smoke.base_image.linux/arm64", spec.lines["targets.smoke.base_image.linux/arm64"],
         ("linux/arm64",), "linux/arm64"),
    ]
    assert [e.key for e in pinning.entries(spec, spec.target("smoke"), ("linux/arm64",))] == [
        "targets.smoke.base_image.linux/arm64"]
    (gb10,) = pinning.entries(spec, spec.target("gb10"))
    assert (gb10.key, gb10.token, str(gb10.image)) == ("targets.gb10.base_image", "base_image", CUDA)


def _tc005(path: Path) -> list[str]:
    """The keys of the unpinned-base warnings (TC005) of the spec at ``path``, in the spec's order."""
    return [f.key for f in rules.run_rules(load_spec(path), only=("TC005",))]


def _but_smoke(keys: list[str]) -> list[str]:
    """What is left unpinned once smoke's bases are pinned: every other target's, cuda_smoke's among them."""
    left = [k for k in keys if not k.startswith("targets.smoke.")]
    assert "targets.cuda_smoke.base_image.linux/amd64" in left and len(left) < len(keys)
    return left


def test_pin_edits_only_the_value_on_the_recorded_lines(tmp_path):
    unpinned = _tc005(_spec_file(tmp_path))
    before, after = _pin_all(tmp_path / "stack.yaml", "smoke")
    assert _changed_lines(before, after) == [
        (SHIPPED_AMD64, f"      linux/amd64: megacpp-base/debian-forky:amd64@{DIGEST}\n"),
        ("      linux/arm64: megacpp-base/debian-forky:arm64\n",
         f"      linux/arm64: megacpp-base/debian-forky:arm64@{DIGEST}\n"),
    ]
    # cuda_smoke names the same bases on identical lines: pinning smoke's leaves them unpinned
    assert _tc005(tmp_path / "stack.yaml") == _but_smoke(unpinned)


@pytest.mark.parametrize(("line", "pinned"), [
    (f"    base_image: {CUDA}   # the CUDA base\n", f"    base_image: {CUDA}@{DIGEST}   # the CUDA base\n"),
    (f'    base_image: "{CUDA}"\n', f'    base_image: "{CUDA}@{DIGEST}"\n'),
    (f"    base_image: '{CUDA}'  # quoted\n", f"    base_image: '{CUDA}@{DIGEST}'  # quoted\n"),
    (f"    base_image: {{linux/arm64: {CUDA}}}\n", f"    base_image: {{linux/arm64: {CUDA}@{DIGEST}}}\n"),
    (f"    'base_image': {CUDA}\n", f"    'base_image': {CUDA}@{DIGEST}\n"),
    (f"    base_image: {CUDA}@sha256:{'0' * 64}\n", f"    base_image: {CUDA}@{DIGEST}\n"),  # a re-pin
])
def test_pin_keeps_quoting_comments_and_flow_style(tmp_path, line, pinned):
    path = _spec_file(tmp_path, f"    base_image: {CUDA}\n", line)
    before, after = _pin_all(path, "gb10")
    assert _changed_lines(before, after) == [(line, pinned)]  # gb10's line; cloud's (the same image) is left alone


def test_flow_mapping_with_the_same_image_twice_edits_one_platform(tmp_path):
    flow = "    base_image: {linux/amd64: 'megacpp-base/debian-forky:amd64', linux/arm64: megacpp-base/debian-forky:amd64}\n"
    path = _spec_file(tmp_path, "    base_image:                         # made by scripts/make-base-image.sh "
                      "(debootstrap + docker import)\n" + SHIPPED_AMD64
                      + "      linux/arm64: megacpp-base/debian-forky:arm64\n", flow, key="targets.smoke.base_image")
    spec = load_spec(path)
    arm = [e for e in pinning.entries(spec, spec.target("smoke")) if e.platforms == ("linux/arm64",)]
    assert pinning.write_pins(spec, [pinning.PinResult(entry=arm[0], status=pinning.PINNED, digest=DIGEST)])
    assert path.read_text().count(flow.replace("arm64: megacpp-base/debian-forky:amd64",
                                               f"arm64: megacpp-base/debian-forky:amd64@{DIGEST}")) == 1


@pytest.mark.parametrize("layout", ["alias", "next_line"])
def test_values_not_on_the_key_line_are_refused_with_a_remedy(tmp_path, layout):
    path = _spec_file(tmp_path)
    line = f"    base_image: {CUDA}\n"
    text = path.read_text()
    if layout == "alias":  # gb10 anchors the image, cloud names it through the alias
        text = text.replace(line, f"    base_image: &cuda_base {CUDA}\n", 1).replace(line, "    base_image: *cuda_base\n")
    else:
        text = text.replace(line, f"    base_image:\n      {CUDA}\n")
    path.write_text(text)
    spec = load_spec(path)
    (entry,) = pinning.entries(spec, spec.target("cloud"))
    with pytest.raises(SpecError) as exc:
        pinning.write_pins(spec, [pinning.PinResult(entry=entry, status=pinning.PINNED, digest=DIGEST)])
    assert str(exc.value) == (
        f"{path}:{entry.line}: targets.cloud.base_image: cannot find `base_image: {CUDA}` on this line to edit "
        f"(0 matches) (remedy: write {CUDA}@{DIGEST} there by hand)")
    assert path.read_text() == text  # nothing written


def test_unchanged_pins_write_nothing(tmp_path):
    path = _spec_file(tmp_path, SHIPPED_AMD64, SHIPPED_AMD64, key="targets.smoke.base_image.linux/amd64")
    spec = load_spec(path)
    results = [pinning.PinResult(entry=e, status=pinning.UNCHANGED) for e in pinning.entries(spec, spec.target("smoke"))]
    mtime = path.stat().st_mtime_ns
    assert pinning.write_pins(spec, results) is False and path.stat().st_mtime_ns == mtime


def test_an_unreachable_registry_names_the_key_and_writes_nothing(tmp_path, capsys):
    path = _spec_file(tmp_path, f"    base_image: {CUDA}\n", "    base_image: 127.0.0.1:9/nvidia/cuda:13.2.0  # closed port\n")
    before = path.read_text()
    line = load_spec(path).lines["targets.gb10.base_image"]
    assert dispatch(argparse.Namespace(verb="pin-base", **vars(_pin_args(path, "gb10", json=True)))) == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error.startswith(f"{path}:{line}: targets.gb10.base_image: HEAD http://127.0.0.1:9/v2/nvidia/cuda/manifests/"
                            "13.2.0: cannot reach the registry: ")
    assert path.read_text() == before
    assert pin_cmd.run(_pin_args(path, "gb10", check=True)) == 1  # an unpinned base: said without asking
    assert capsys.readouterr().out.startswith(f"unpinned: {path}:{line}: targets.gb10.base_image: ")
    pinned = before.replace("cuda:13.2.0  # closed", f"cuda:13.2.0@{DIGEST}  # closed", 1)
    path.write_text(pinned)
    with pytest.raises(RegistryError, match=r"targets\.gb10\.base_image: HEAD .*: cannot reach the registry"):
        pin_cmd.run(_pin_args(path, "gb10", check=True))  # a pinned base: --check asks its registry
    spec = load_spec(path)
    with pytest.raises(RefusedError) as exc:
        pinning.refuse_if_base_moved(spec, spec.target("gb10"), "linux/arm64")  # what `build` runs first
    assert str(exc.value).startswith("refusing to build: cannot check that the pinned base image's tag still names "
                                     f"its digest: {path}:{line}: targets.gb10.base_image: HEAD http://127.0.0.1:9/")
    assert str(exc.value).endswith("(remedy: --skip-base-check builds from the pinned digest without asking the "
                                   "registry)")
    pinning.refuse_if_base_moved(spec, spec.target("cloud"), "linux/amd64")  # unpinned: nothing to ask


# ---- against the real registry -------------------------------------------------------------------


def _pin_args(spec: Path, target: str = "smoke", *, check: bool = False, json: bool = False, platform=()):
    return argparse.Namespace(spec=str(spec), target=target, platform=list(platform), check=check, json=json)


def _use_registry_base(repo: Path, ref: str) -> Path:
    """The copy's smoke target becomes amd64-only, FROM ``ref`` (a comment on the line shows it is kept)."""
    path = repo / "stack.yaml"
    text = path.read_text()
    old = ("    platforms: [linux/amd64, linux/arm64]\n    base_image:                         # made by "
           "scripts/make-base-image.sh (debootstrap + docker import)\n" + SHIPPED_AMD64
           + "      linux/arm64: megacpp-base/debian-forky:arm64\n")
    assert text.count(old) == 1
    path.write_text(text.replace(old, f'    platforms: [linux/amd64]\n    base_image: "{ref}"   # pushed by the test\n'))
    return path


def _render(spec_path: Path) -> None:
    from megacpp_env import render

    spec = load_spec(spec_path)
    render.write(spec.root, render.render_target(spec, spec.target("smoke")))


@pytest.mark.docker
def test_pin_base_writes_the_registry_digest(pushed_base, repo_copy, capsys):
    path = _use_registry_base(repo_copy, pushed_base.ref)
    _render(path)
    before = path.read_text()
    unpinned = _tc005(path)
    line = load_spec(path).lines["targets.smoke.base_image"]
    assert pin_cmd.run(_pin_args(path, check=True)) == 1
    assert capsys.readouterr().out == (
        f"unpinned: {path}:{line}: targets.smoke.base_image: {pushed_base.ref} has no @sha256 digest "
        "(remedy: `megacpp-env pin-base smoke`)\n")
    assert pin_cmd.run(_pin_args(path)) == 0
    out = capsys.readouterr().out
    pinned = f"{pushed_base.ref}@{pushed_base.digest}"
    assert out == (f"{path}:{line}: targets.smoke.base_image (linux/amd64): pinned: {pinned} "
                   f"[application/vnd.docker.distribution.manifest.v2+json]\n"
                   f"wrote {path}; rendered images/smoke/Dockerfile\n")
    assert _changed_lines(before, path.read_text()) == [
        (f'    base_image: "{pushed_base.ref}"   # pushed by the test\n',
         f'    base_image: "{pinned}"   # pushed by the test\n')]
    spec = load_spec(path)
    # cuda_smoke names the same bases on identical lines: pinning smoke's leaves them unpinned
    assert _tc005(path) == _but_smoke(unpinned)  # smoke no longer warns
    assert f"ARG BASE_IMAGE_AMD64={pinned}\n" in (repo_copy / "images/smoke/Dockerfile").read_text()
    assert build.preflight(spec, spec.target("smoke"), "linux/amd64") == []  # the Dockerfile was re-rendered
    assert pin_cmd.run(_pin_args(path, check=True)) == 0
    assert capsys.readouterr().out.endswith("(the tag still names the pinned digest)\n")
    mtime = path.stat().st_mtime_ns
    assert pin_cmd.run(_pin_args(path)) == 0 and path.stat().st_mtime_ns == mtime
    assert ": unchanged: " in capsys.readouterr().out


@pytest.mark.docker
def test_pin_base_refuses_an_image_of_another_platform(pushed_base, registry_host, repo_copy, pushes):
    """The amd64 base pushed under an arm64 tag: the config says amd64, so the pin is refused."""
    pushes.append(push_local(pushed_base.ref, f"{registry_host}/megacpp-test/wrong-arch:arm64"))
    ref = pushes[-1].ref
    path = repo_copy / "stack.yaml"
    path.write_text(path.read_text().replace("linux/arm64: megacpp-base/debian-forky:arm64",
                                             f"linux/arm64: {ref}"))
    before = path.read_text()
    with pytest.raises(VerificationError) as exc:
        pin_cmd.run(_pin_args(path, platform=["linux/arm64"]))
    assert re.fullmatch(
        rf"{re.escape(str(path))}:{load_spec(path).lines['targets.smoke.base_image.linux/arm64']}: targets\.smoke\.base_image\.linux/arm64: {re.escape(ref)} \(sha256:[0-9a-f]{{64}}\) "
        r"serves linux/amd64, not linux/arm64 \(remedy: name an image built for linux/arm64\)", str(exc.value))
    assert path.read_text() == before


@pytest.mark.docker
def test_a_moved_tag_is_drift_for_check_and_build(pushed_base, registry_host, repo_copy, smoke_source_server, capsys,
                                                  pushes):
    """Pin a base, push a DIFFERENT image under the same tag: `pin-base --check` and `build` catch it."""
    original = push_local(pushed_base.ref, f"{registry_host}/megacpp-test/drift-base:amd64")
    pushes.append(original)
    path = _use_registry_base(repo_copy, original.ref)
    assert pin_cmd.run(_pin_args(path)) == 0
    capsys.readouterr()
    nonce = uuid.uuid4().hex
    moved_ref = original.ref
    rc, log = docker.stream(docker.stdin_build_argv(moved_ref, "linux/amd64", {"io.megacpp.test.moved": nonce},
                                                    docker=docker.binary()), stdin=f"FROM {original.ref}\n")
    assert rc == 0, "\n".join(log.last_lines)
    moved = docker.push(moved_ref)
    pushes.append(PushedImage(ref=moved_ref, digest=moved))  # the moved image: only this tag names it
    assert moved != original.digest
    line = load_spec(path).lines["targets.smoke.base_image"]
    drift = (f"{path}:{line}: targets.smoke.base_image: the tag {original.ref} now names {moved}, not the pinned "
             f"{original.digest}: the base image changed under its tag (remedy: inspect the new image; if it is "
             "wanted, `megacpp-env pin-base smoke` moves the pin and re-renders; if not, push the pinned image "
             "back to the tag)")
    assert pin_cmd.run(_pin_args(path, check=True)) == 1
    assert capsys.readouterr().out == f"drift: {drift}\n"
    args = _build_args(path)
    assert dispatch(args) == 1  # JSON on failure: cli's one handler
    refused = f"refusing to build: {drift}; --skip-base-check builds from the pinned digest anyway"
    assert json.loads(capsys.readouterr().out) == {"ok": False, "error": refused}
    args.json = False
    with pytest.raises(VerificationError, match=re.escape(refused)):
        build_cmd.run(args)
    args.json = True
    args.skip_base_check = True  # builds FROM the pinned digest: the moved image's label is not inherited
    assert build_cmd.run(args) == 0
    doc = json.loads(capsys.readouterr().out)
    labels = docker.image_labels(doc["tag"])
    assert labels["org.opencontainers.image.base.name"] == f"{original.ref}@{original.digest}"
    assert "io.megacpp.test.moved" not in labels
    docker.remove_image(doc["tag"])
    remove_if_untagged(doc["build_image_id"])
    assert pin_cmd.run(_pin_args(path)) == 0  # the remedy: move the pin
    assert f": repinned: {original.ref}@{moved} " in capsys.readouterr().out
    assert pin_cmd.run(_pin_args(path, check=True)) == 0


def _build_args(path: Path) -> argparse.Namespace:
    """``build smoke --json`` parsed by the real parser (a hand-made Namespace misses new options)."""
    from megacpp_env.cli import build_parser
    from tests.fixtures.docker import ca_bundle

    ca = ca_bundle()
    argv = ["build", "smoke", "--spec", str(path), "--json", *(["--ca-bundle", ca] if ca else [])]
    return build_parser(argv).parse_args(argv)


# ---- issue 19: a symlinked stack.yaml, a faulty registry ------------------------------------------


def test_pin_writes_through_a_symlinked_spec(tmp_path):
    real = _spec_file(tmp_path)
    (tmp_path / "link").mkdir()
    link = tmp_path / "link" / "stack.yaml"
    link.symlink_to(real)
    before = real.read_text()
    spec = load_spec(link)
    results = [pinning.PinResult(entry=e, status=pinning.PINNED, digest=DIGEST)
               for e in pinning.entries(spec, spec.target("smoke"))]
    assert pinning.write_pins(spec, results)
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert real.read_text() != before and f"debian-forky:amd64@{DIGEST}" in real.read_text()


@pytest.mark.parametrize("case", ["bad-status-line", "header-over-64k", "over-100-headers", "realm-with-del",
                                  "manifests-a-string", "deep-nesting", "content-length-abc"])
def test_pin_base_against_a_faulty_registry_is_one_line(tmp_path, capsys, case):
    from tests.fixtures.faultyhttp import serve
    from tests.test_registry_hostile import CASES

    with serve(CASES[case]) as server:
        path = _spec_file(tmp_path, f"    base_image: {CUDA}\n", f"    base_image: {server.host}/x/y:1\n")
        before = path.read_text()
        code = dispatch(argparse.Namespace(verb="pin-base", **vars(_pin_args(path, "gb10", json=True))))
    out = capsys.readouterr().out
    assert code == 1, out
    error = json.loads(out)["error"]
    assert "Traceback" not in out and "\n" not in error and error.startswith(f"{path}:")
    assert path.read_text() == before
