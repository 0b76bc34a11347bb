"""Rules on the build environment a source gets, judged against what its build files really read
(facts + overlay + the build tools it uses): a variable nothing reads, an arch list a setup.py
ignores, a source building its hard-coded arch list, FlashInfer's space-separated arch list, family
targets torch's cpp_extension rejects, and switches upstream compares with one exact string."""

from __future__ import annotations

import re
from collections.abc import Iterator

from megacpp_env.rules.base import Hit, build_rule, builds, spec_rule
from megacpp_env.rules.readers import overlay_arch_var, readers, source_env_key, spec_facts
from megacpp_env.spec import envpolicy
from megacpp_env.spec.model import Source, Spec, Target

FLASHINFER_ARCH_RE = re.compile(r"^[0-9]+\.[0-9]+[af]?$")
BOOLEAN_WORDS = frozenset({"TRUE", "FALSE", "true", "false", "True", "False", "1", "0", "ON", "OFF", "YES", "NO"})


def _own_env(t: Target, src: Source) -> dict[str, str]:
    """What the spec sets for this source specifically (its build_env, the target's env.sources.NAME)."""
    return {**src.build_env, **t.source_env.get(src.name, {})}


@spec_rule("UP001", "error", once=True)
def unread_env(spec: Spec) -> Iterator[Hit]:
    """no build variable that upstream does not read

    No build variable that upstream does not read: the facts, the overlay's files and the build tools the facts show
    decide what a build reads; a knob (compiler, CUDA) or a reason in build_env_reasons is accepted.

    Trip: set sources.flashinfer.build_env.FLASHINFER_ENABLE_AOT = "1"
    """
    for t, src in builds(spec, wheels=True):
        yield from _unread_source_env(spec, t, src)
    yield from _unread_target_env(spec)


def _unread_source_env(spec: Spec, t: Target, src: Source) -> Iterator[Hit]:
    f = spec_facts(spec).get(src.name)
    if f is None:  # no facts to say what the build reads: only compiler and CUDA knobs
        yield from _unbacked_env(spec, t, src)
        return
    who = readers(spec, src, f)
    for var in sorted(_own_env(t, src)):
        key = source_env_key(spec, t.name, src, var)
        if who.reads(var) or (var == "TORCH_CUDA_ARCH_LIST" and f.arch.gencode) or var in src.build_env_reasons:
            continue  # a hard-coded -gencode list is UP002's finding; a stated reason is the spec's word
        yield (
            key,
            f"{src.name} does not read {var}: no file of its build at {f.commit[:12]} reads it "
            f"(facts/{src.name}.toml), nor its overlay, nor a build tool it uses",
            _unread_remedy(var, who.names),
        )


def _unbacked_env(spec: Spec, t: Target, src: Source) -> Iterator[Hit]:
    for var in sorted(_own_env(t, src)):
        if not envpolicy.is_build_knob(var) and var not in src.build_env_reasons:
            yield (
                source_env_key(spec, t.name, src, var),
                f"{var} is not a compiler or CUDA variable, and no facts/{src.name}.toml says {src.name}'s "
                "build reads it (build variables are an allowlist)",
                f"run `megacpp-env facts extract {src.name} --from CHECKOUT` and commit it, say why under "
                f"sources.{src.name}.build_env_reasons.{var}, or drop {var}",
            )


def _unread_remedy(var: str, names: dict[str, str]) -> str:
    close = sorted(n for n in names if n.startswith(var.rsplit("_", 1)[0]) or var.startswith(n))
    if close:
        return f"drop it; the build reads {', '.join(close[:3])} ({names[close[0]]})"
    return "drop it, or add an overlay whose build files read it"


def _unread_target_env(spec: Spec) -> Iterator[Hit]:
    facts = spec_facts(spec)
    for t in spec.targets.values():
        built = [(s, facts.get(s.name)) for s in t.sources if s.install == "wheel"]
        if not built or any(f is None for _, f in built):
            continue
        who = [readers(spec, s, f) for s, f in built if f is not None]
        for var in sorted(t.build_env):
            if not any(r.reads(var) for r in who):
                yield (
                    f"targets.{t.name}.env.build.{var}",
                    f"no source of {t.name} reads {var} ({', '.join(s.name for s, _ in built)}: facts and overlays)",
                    "drop it, or set it only where a build reads it (env.sources.NAME)",
                )


@build_rule("UP002", "error", wheels=True, once=True)
def ignored_arch_list(spec: Spec, t: Target, src: Source) -> Iterator[Hit]:
    """no TORCH_CUDA_ARCH_LIST for a setup.py that hard-codes its -gencode list

    No TORCH_CUDA_ARCH_LIST for a setup.py that hard-codes its -gencode list (it would be ignored), unless an
    overlay reads an arch variable.

    Trip: drop sources.mamba_ssm.overlay
    Trip: set sources.mamba_ssm.build_env.TORCH_CUDA_ARCH_LIST = "12.0"
    """
    f = spec_facts(spec).get(src.name)
    if f is None or not f.arch.gencode or "TORCH_CUDA_ARCH_LIST" not in _own_env(t, src):
        return
    if overlay_arch_var(spec, src):
        return
    yield (
        source_env_key(spec, t.name, src, "TORCH_CUDA_ARCH_LIST"),
        f"{src.name} ignores TORCH_CUDA_ARCH_LIST: its setup.py passes its own -gencode list "
        f"({len(f.arch.gencode)} targets, {f.arch.gencode_at[0]}), and torch's cpp_extension then adds none",
        f"drop it; restrict {src.name}'s archs with an overlay whose setup.py reads an arch variable "
        "(e.g. MEGACPP_CUDA_ARCHS) and set that",
    )


@build_rule("UP003", "warning", wheels=True)
def hard_coded_archs(spec: Spec, t: Target, src: Source) -> Iterator[Hit]:
    """sources build the target's archs, not a hard-coded list

    Sources build the target's archs, not a hard-coded list: an overlay reads the arch variable and the target sets
    it per source.

    Trip: drop targets.gb10.env.sources.causal_conv1d
    """
    f = spec_facts(spec).get(src.name)
    var = overlay_arch_var(spec, src)
    if t.gpu is None or f is None or not f.arch.gencode or (var and var in t.build_env_for(src)):
        return
    archs = ", ".join(g.rpartition("code=")[2] for g in f.arch.gencode)
    threads = f" with nvcc --threads {f.arch.nvcc_threads} ({f.arch.nvcc_threads_at})" if f.arch.nvcc_threads else ""
    yield (
        f"targets.{t.name}.sources",
        f"{src.name} compiles its hard-coded list ({archs}; {f.arch.gencode_at[0]}){threads} whatever "
        f"{t.name} runs on ({', '.join(t.gpu.archs)}): build time and memory for nothing",
        f"set {var} for {src.name} under targets.{t.name}.env.sources (its overlay reads it)"
        if var
        else f"give {src.name} an overlay that reads the target's archs (MEGACPP_CUDA_ARCHS) and set it per target",
    )


SM_TOKEN_RE = re.compile(r"^[1-9][0-9]{1,2}[af]?$")


@build_rule("UP010", "error", wheels=True)
def overlay_archs_cover_target(spec: Spec, t: Target, src: Source) -> Iterator[Hit]:
    """an arch overlay's list covers every arch the target runs on, and only valid SMs

    MEGACPP_CUDA_ARCHS (or the variable an overlay reads) compiles SASS for exactly the listed SMs:
    an arch of ``gpu.archs`` missing from it means kernels that do not load on that GPU.

    Trip: set targets.cloud.env.sources.causal_conv1d = {MEGACPP_CUDA_ARCHS: "90a"}
    """
    var = overlay_arch_var(spec, src)
    env = t.build_env_for(src)
    if not var or var not in env or t.gpu is None:
        return
    key = source_env_key(spec, t.name, src, var)
    tokens = env[var].split()
    bad = [tok for tok in tokens if not SM_TOKEN_RE.match(tok)]
    if bad or not tokens:
        yield key, f"{var}={env[var]!r}: expected space-separated SMs such as '90a 100a' or '121a'", "fix the list"
        return
    missing = [a for a in t.gpu.archs if a.removeprefix("sm_") not in tokens]
    if missing:
        yield (
            key,
            f"{src.name} on {t.name} is compiled for {', '.join(tokens)} only, but {t.name} runs on "
            f"{', '.join(missing)}: its kernels would not load there (SASS only, no PTX)",
            f"add {' '.join(a.removeprefix('sm_') for a in missing)} to {var}",
        )


def _env_values(spec: Spec, name: str) -> Iterator[tuple[str, str]]:
    """Every (key, value) where the spec sets ``name`` for a build."""
    for t in spec.targets.values():
        if name in t.build_env:
            yield f"targets.{t.name}.env.build.{name}", t.build_env[name]
        for src_name, env in t.source_env.items():
            if name in env:
                yield f"targets.{t.name}.env.sources.{src_name}.{name}", env[name]
    for src in spec.sources.values():
        if name in src.build_env:
            yield f"sources.{src.name}.build_env.{name}", src.build_env[name]


@spec_rule("UP004", "error")
def flashinfer_arch_list(spec: Spec) -> Iterator[Hit]:
    """FLASHINFER_CUDA_ARCH_LIST is space-separated

    FLASHINFER_CUDA_ARCH_LIST is space-separated (FlashInfer splits it on spaces).

    Trip: set targets.gb10.env.sources.flashinfer_jit_cache.FLASHINFER_CUDA_ARCH_LIST = "9.0a;10.0a"
    """
    for key, value in _env_values(spec, "FLASHINFER_CUDA_ARCH_LIST"):
        tokens = value.split(" ")
        if ";" in value or not value or any(not FLASHINFER_ARCH_RE.match(tok) for tok in tokens):
            fixed = " ".join(t for t in re.split(r"[;,\s]+", value) if t)
            yield (
                key,
                f"{value!r}: FlashInfer splits this list on single spaces (flashinfer/compilation_context.py); "
                "';', commas or doubled spaces crash its build with 'too many/not enough values to unpack'",
                f'write "{fixed}"',
            )


@spec_rule("UP005", "error")
def family_arch_in_torch_list(spec: Spec) -> Iterator[Hit]:
    """no family (f) arch in TORCH_CUDA_ARCH_LIST

    No family (f) arch in TORCH_CUDA_ARCH_LIST: torch's cpp_extension rejects it.

    Trip: set targets.gb10.gpu.torch_cuda_arch_list = "9.0;10.0;12.0f"
    """
    values = list(_env_values(spec, "TORCH_CUDA_ARCH_LIST"))
    values += [
        (f"targets.{t.name}.gpu.torch_cuda_arch_list", t.gpu.torch_cuda_arch_list)
        for t in spec.targets.values()
        if t.gpu is not None
    ]
    for key, value in values:
        bad = [a for a in value.replace("+PTX", "").split(";") if a.endswith("f")]
        if bad:
            yield (
                key,
                f"{', '.join(bad)} in {value!r}: torch 2.13's cpp_extension raises 'Unknown CUDA arch' for family "
                "targets (its list ends at 12.1a), failing every extension that takes its archs from the list",
                "use 12.0 (vLLM widens its kernels to 12.0f itself) or the exact 12.1a",
            )


@build_rule("UP006", "error", wheels=True, once=True)
def exact_switch_values(spec: Spec, t: Target, src: Source) -> Iterator[Hit]:
    """switches upstream compares with one exact string are set to it

    A switch upstream compares with one exact string is set to that string (CAUSAL_CONV1D_FORCE_BUILD: "TRUE", not
    "true").

    Trip: set sources.causal_conv1d.build_env.CAUSAL_CONV1D_FORCE_BUILD = "true"
    """
    f = spec_facts(spec).get(src.name)
    if f is None:
        return
    for var, value in sorted(_own_env(t, src).items()):
        read = f.env_read(var)
        if read is None or not read.compared or value in read.compared:
            continue
        if var.endswith("_FORCE_BUILD") or set(read.compared) <= BOOLEAN_WORDS:
            wanted = " or ".join(repr(c) for c in read.compared)
            yield (
                source_env_key(spec, t.name, src, var),
                f"{src.name} compares {var} with {wanted} ({read.at[0]}): {value!r} does nothing",
                f"set {var}: {read.compared[0]!r} exactly",
            )
