"""Package URLs in the SBOM: the hand-written encoder (megacpp_env/sbom/purl.py) held to packageurl-python, the
purl spec's reference library, on generated names, versions and qualifiers (the same string, and the same fields
read back); a purl for every pinned source and every build-time fetch of the shipped spec."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packageurl import PackageURL

from megacpp_env.sbom import purl as P
from megacpp_env.spec import load_spec
from tests.fixtures.spec import REPO_ROOT

# text without "/" (a name or version is one segment), and no leading or trailing space (the library strips
# those, the SBOM never has them); every other character, percent signs, "@", "?", "#", ":" and non-ASCII included
SEGMENT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/"), min_size=1, max_size=20
).filter(lambda t: t == t.strip())
QUALIFIER = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30).filter(lambda t: t.strip())


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["pypi", "github", "deb", "generic"]),
    namespace=st.one_of(st.just(""), SEGMENT),
    name=SEGMENT,
    version=st.one_of(st.just(""), SEGMENT),
    qualifiers=st.dictionaries(st.sampled_from(["arch", "vcs_url", "distro"]), QUALIFIER, max_size=3),
)
def test_the_encoder_writes_what_packageurl_python_writes(kind, namespace, name, version, qualifiers) -> None:
    if kind == "pypi":
        namespace = ""
    ours = P.purl(kind, name, version, namespace=namespace, qualifiers=qualifiers)
    ref = PackageURL(type=kind, namespace=namespace or None, name=name, version=version or None, qualifiers=qualifiers)
    assert _escapes_upper(ours) == _escapes_upper(ref.to_string())  # the library lowercases github's and pypi's
    # names after encoding them (%1B -> %1b): the same octet, RFC 3986 2.1
    back = PackageURL.from_string(ours)
    assert (back.name, back.version or "", dict(back.qualifiers)) == (ref.name, ref.version or "", dict(ref.qualifiers))


@settings(max_examples=300, deadline=None)
@given(vendor=st.one_of(st.just(""), st.from_regex(r"[a-z][a-z0-9._-]{0,8}", fullmatch=True)),
       name=st.from_regex(r"[a-z0-9][a-z0-9+.-]{0,20}", fullmatch=True),
       version=st.from_regex(r"([0-9]{1,2}:)?[0-9][0-9A-Za-z.+~-]{0,20}", fullmatch=True),
       arch=st.from_regex(r"[a-z0-9-]{1,12}", fullmatch=True))  # fmt: skip
def test_a_debian_purl_reads_back_as_packageurl_python_reads_it(vendor, name, version, arch) -> None:
    text = P.deb_purl(vendor, name, version, arch)
    ref = PackageURL.from_string(text)
    assert P.parse_deb_purl(text) == (ref.namespace or "", ref.name, ref.version, ref.qualifiers["arch"])
    assert (ref.namespace or "", ref.name, ref.version) == (vendor, name, version)


@pytest.mark.parametrize(
    ("purl", "parsed"),
    [
        (
            "pkg:deb/debian/libstdc%2B%2B6@1:15.2.0-4%2Bb1?arch=amd64",
            ("debian", "libstdc++6", "1:15.2.0-4+b1", "amd64"),
        ),
        ("pkg:deb/ubuntu/curl@8.5.0?arch=arm64&distro=noble", ("ubuntu", "curl", "8.5.0", "arm64")),
        ("pkg:deb/curl@8.5.0", ("", "curl", "8.5.0", "")),
        ("pkg:deb/debian/curl", None),  # no version
        ("pkg:pypi/six@1.17.0", None),
        ("pkg:deb/a/b/c@1", None),  # a namespace of two segments: not one deb_purl writes
    ],
)
def test_parse_deb_purl(purl, parsed) -> None:
    assert P.parse_deb_purl(purl) == parsed


def _escapes_upper(text: str) -> str:
    return re.sub(r"%[0-9a-fA-F]{2}", lambda m: m[0].upper(), text)


SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    ("repo", "expected"),
    [
        ("https://github.com/NVIDIA/Megatron-LM.git", f"pkg:github/nvidia/megatron-lm@{SHA}"),
        ("https://github.com/state-spaces/mamba", f"pkg:github/state-spaces/mamba@{SHA}"),
        ("https://github.com/vllm-project/FlashMLA/", f"pkg:github/vllm-project/flashmla@{SHA}"),
        ("http://www.github.com/a/b.git", f"pkg:github/a/b@{SHA}"),
        ("git://github.com/a/b.git", f"pkg:github/a/b@{SHA}"),
        ("ssh://git@github.com/a/b.git", f"pkg:github/a/b@{SHA}"),
        ("git@github.com:Owner/Repo.git", f"pkg:github/owner/repo@{SHA}"),
        ("https://GitHub.com:443/a/b.git", f"pkg:github/a/b@{SHA}"),
        # not a repository on GitHub: generic, with the VCS URL that fetches it
        ("git://127.0.0.1:9418/megacpp-smoke-ext.git",
         f"pkg:generic/ext@{SHA}?vcs_url=git%2Bgit://127.0.0.1:9418/megacpp-smoke-ext.git%40{SHA}"),
        ("https://gitlab.com/a/b.git", f"pkg:generic/ext@{SHA}?vcs_url=git%2Bhttps://gitlab.com/a/b.git%40{SHA}"),
        ("https://github.com/a/b/c.git", f"pkg:generic/ext@{SHA}?vcs_url=git%2Bhttps://github.com/a/b/c.git%40{SHA}"),
        ("https://github.com.evil.example/a/b", f"pkg:generic/ext@{SHA}?vcs_url=git%2Bhttps://github.com.evil.example/a/b%40{SHA}"),
        ("file:///srv/git/ext.git", f"pkg:generic/ext@{SHA}?vcs_url=git%2Bfile:///srv/git/ext.git%40{SHA}"),
        ("git@example.org:team/ext.git", f"pkg:generic/ext@{SHA}?vcs_url=git%2Bssh://git%40example.org/team/ext.git%40{SHA}"),
    ],
)  # fmt: skip
def test_a_source_purl(repo, expected) -> None:
    text = P.source_purl("ext", repo, SHA)
    assert text == expected
    assert PackageURL.from_string(text).version == SHA


def test_every_source_and_every_fetch_of_the_shipped_spec_has_its_purl() -> None:
    """Every target's sources, and the sources their builds fetch, in the SBOM's components: a GitHub repository
    as pkg:github/OWNER/REPO@SHA (what packageurl-python writes for it), the loopback one as pkg:generic."""
    from megacpp_env.sbom import source_components

    spec = load_spec(REPO_ROOT / "stack.yaml")
    seen = set()
    for target in spec.targets.values():
        comps, _ = source_components(spec, target)
        names = {s.name for s in target.sources} | {n for s in target.sources for n in s.fetches.values()}
        assert {c["name"] for c in comps} == names
        for comp in comps:
            src = spec.sources[comp["name"]]
            owner_repo = src.repo.removeprefix("https://github.com/").removesuffix(".git")
            if src.repo.startswith("https://github.com/"):
                owner, repo = owner_repo.split("/")
                want = PackageURL(type="github", namespace=owner, name=repo, version=src.commit).to_string()
            else:
                want = PackageURL(type="generic", name=src.name, version=src.commit,
                                  qualifiers={"vcs_url": f"git+{src.repo}@{src.commit}"}).to_string()  # fmt: skip
            assert comp["purl"] == want, comp["name"]
            seen.add(comp["purl"].split("/")[0])
    assert seen == {"pkg:github", "pkg:generic"}
