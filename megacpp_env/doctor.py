"""``doctor``: the live machine (a snapshot) against what one target of the spec promises.

It compares spec + lock + snapshot, so it sits above all three (``snapshot`` itself needs neither
a spec nor a lock).

Toolchain versions, minimum driver, Python, every locked distribution (missing, wrong version,
wrong source), installed files modified since install, pinned checkouts and their overlays, GPU
architecture against the target's arch list, runtime patches. Findings of severity ``error`` make
the command exit 1; ``ok`` lines record what was checked and passed.
"""

from __future__ import annotations

import fnmatch
import platform as host_platform
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from megacpp_env import layout
from megacpp_env.findings import CodeDoc, Finding, Severity
from megacpp_env.lock.pylock import Lock, LockedPackage, LockFormatError, read_pylock
from megacpp_env.snapshot.collectors.runtime import HOOK_GLOB
from megacpp_env.snapshot.diff import show
from megacpp_env.snapshot.document import Snapshot
from megacpp_env.spec import suppress

if TYPE_CHECKING:
    from megacpp_env.spec.model import Source, Spec, Target

RANK = ("error", "warning", "info", "ok")
ARCH_PLATFORM = {"x86_64": "linux/amd64", "amd64": "linux/amd64", "aarch64": "linux/arm64", "arm64": "linux/arm64"}
GATE_PREFIX = "MEGACPP_PATCH_"
SM_RE = re.compile(r"sm_(\d+)(\d)[af]?")


@dataclass(frozen=True, kw_only=True, slots=True)
class DoctorReport:
    target: str
    platform: str
    lock: str
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return not any(f.fails() for f in self.findings)

    def counts(self) -> dict[str, int]:
        out = {s: sum(1 for f in self.findings if f.severity == s and not f.suppressed) for s in RANK}
        suppressed = sum(1 for f in self.findings if f.suppressed)
        return {**out, "suppressed": suppressed} if suppressed else out

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "platform": self.platform,
            "lock": self.lock,
            "ok": self.ok,
            "counts": self.counts(),
            "findings": [f.to_dict() for f in self.findings],
        }

    def render_text(self) -> str:
        counts = ", ".join(f"{n} {s}" for s, n in self.counts().items() if n)
        lines = [f"doctor {self.target} ({self.platform}): {'ok' if self.ok else 'problems found'} ({counts})"]
        area = ""
        for f in self.findings:
            if f.area != area:
                area = f.area
                lines.append(area)
            if f.suppressed:
                lines.append(f"  {'suppressed':<8} {f.code} {f.message} (reason: {f.suppressed})")
            else:
                lines.append(f"  {f.severity:<8} {f.message}")
        return "\n".join(lines) + "\n"


# area -> code of doctor's findings there (``explain DR002``), in display order
AREA_CODES = {"platform": "DR001", "toolchain": "DR002", "gpu": "DR003", "lock": "DR004", "installed": "DR005",
              "sources": "DR006", "runtime": "DR007", "suppressions": "SUP001"}  # fmt: skip
_WHAT = {
    "platform": "this machine is of a platform the target builds for",
    "toolchain": "the compilers, Python, CUDA, driver, cuDNN, CUTLASS and TRT-LLM are the target's",
    "gpu": "the GPUs' architectures are among the target's",
    "lock": "every locked distribution is installed at its version, from its source",
    "installed": "no installed file was modified since it was installed",
    "sources": "pinned checkouts are at their pins, with their overlays applied",
    "runtime": "the runtime patches and their environment are in effect",
}


def _f(area: str, severity: str, key: str, message: str) -> Finding:
    return Finding(code=AREA_CODES[area], severity=cast("Severity", severity), area=area, key=key, message=message)


def codes() -> tuple[CodeDoc, ...]:
    """The documentation of doctor's codes (``explain``)."""
    return tuple(
        CodeDoc(
            code=code,
            severity="error",
            summary=_WHAT[area],
            family="doctor (megacpp-env doctor TARGET)",
            doc=f"doctor compares the live machine (a snapshot) with what the target promises; its {area} "
            "findings are errors (exit 1), warnings, info or ok (what was checked and passed).",
            example=f"megacpp-env doctor gb10 -> {area}\n  error    <what differs from the target>",
            silence=f'`ignore: {{{code}: "why"}}` under the target (targets.NAME.ignore)',
        )
        for area, code in AREA_CODES.items()
        if area in _WHAT
    )


def live_platform(snapshot: Snapshot) -> str:
    machine = str(snapshot.area("system").get("machine") or host_platform.machine())
    return ARCH_PLATFORM.get(machine, f"linux/{machine}")


def _prefix_ok(have: str, want: str) -> bool:
    return have == want or have.startswith(want + ".")


# ---- toolchain --------------------------------------------------------------------------------


def _tool(snapshot: Snapshot, tool: str, have: str, want: str) -> Finding:
    key = f"toolchain.{tool}"
    if not have:
        return _f("toolchain", "error", key, f"{tool}: not found, target wants {want}")
    if _prefix_ok(have, want):
        return _f("toolchain", "ok", key, f"{tool} {have} (target wants {want})")
    return _f("toolchain", "error", key, f"{tool} {have}, target wants {want}")


def check_toolchain(target: Target, snap: Snapshot) -> list[Finding]:
    tc = target.toolchain
    comp = snap.area("compilers")
    py = str((snap.area("python").get("interpreter") or {}).get("version") or "")
    out = [_tool(snap, "python", py, tc.python)]
    for name in ("gcc", "g++"):
        out.append(_tool(snap, name, str((comp.get(name) or {}).get("version") or ""), tc.gcc))
    if tc.cuda:
        out.append(_tool(snap, "nvcc", str((comp.get("nvcc") or {}).get("release") or ""), tc.cuda))
    out += _triton_ptxas(tc.cuda, comp.get("triton_ptxas") or {})
    out += _driver(tc.min_driver, snap)
    out += _spec_version("cudnn", tc.cudnn, _cudnn_version(snap))
    out += _spec_version("cutlass", tc.cutlass, _dist_version(snap, "nvidia-cutlass", "nvidia-cutlass-dsl"))
    if _dist_version(snap, "tensorrt-llm"):
        out += _spec_version("tensorrt_llm", tc.tensorrt_llm, _dist_version(snap, "tensorrt-llm"))
    return out


def _triton_ptxas(cuda: str, ptxas: dict[str, Any]) -> list[Finding]:
    """Triton ships its own ptxas (12.8 in Triton 3.x), which does not know sm_121a."""
    have = str(ptxas.get("release") or "")
    if not cuda or not have:
        return []
    from packaging.version import InvalidVersion, Version

    try:
        old = Version(have) < Version(cuda)
    except InvalidVersion:
        return []
    how = ptxas.get("chosen_by", "")
    if not old:
        return [_f("toolchain", "ok", "toolchain.triton_ptxas", f"Triton's ptxas is CUDA {have} ({how})")]
    return [
        _f(
            "toolchain",
            "warning",
            "toolchain.triton_ptxas",
            f"Triton will run ptxas {have} ({how}, {ptxas.get('path')}), older than the toolchain's CUDA {cuda}: "
            "set TRITON_PTXAS_PATH to the CUDA toolkit's ptxas (sm_121a needs it)",
        )
    ]


def _driver(min_driver: str, snap: Snapshot) -> list[Finding]:
    if not min_driver:
        return []
    from packaging.version import InvalidVersion, Version

    have = str(snap.area("gpu").get("driver_version") or "")
    if not have:
        why = snap.area("gpu").get("error") or snap.area("gpu").get("reason") or "no driver reported"
        return [
            _f(
                "toolchain",
                "error",
                "toolchain.driver",
                f"NVIDIA driver: not found ({why}); target wants >= {min_driver}",
            )
        ]
    try:
        ok = Version(have) >= Version(min_driver)
    except InvalidVersion:
        return [
            _f("toolchain", "warning", "toolchain.driver", f"NVIDIA driver {have}: cannot compare with {min_driver}")
        ]
    sev, verb = ("ok", ">=") if ok else ("error", "<")
    return [_f("toolchain", sev, "toolchain.driver", f"NVIDIA driver {have} {verb} minimum {min_driver}")]


def _dist_version(snap: Snapshot, *names: str) -> str:
    dists = snap.area("python").get("distributions") or {}
    for name in names:
        if name in dists:
            return str(dists[name].get("version") or "")
    return ""


def _cudnn_version(snap: Snapshot) -> str:
    imported = snap.area("torch").get("imported")
    value = imported.get("cudnn") if isinstance(imported, dict) else None
    if isinstance(value, int) and value > 0:  # torch reports 91300 for 9.13.0
        major, rest = divmod(value, 10000) if value >= 10000 else divmod(value, 1000)
        return f"{major}.{rest // 100}.{rest % 100}"
    return _dist_version(snap, "nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn")


def _spec_version(what: str, spec: str, have: str) -> list[Finding]:
    if not spec:
        return []
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    key = f"toolchain.{what}"
    if not have:
        return [_f("toolchain", "warning", key, f"{what}: not found in the environment, target wants {spec}")]
    try:
        specifier = SpecifierSet(spec if spec[0] in "<>=!~" else f"=={spec}.*")
        ok = specifier.contains(have, prereleases=True)
    except InvalidSpecifier:
        return [_f("toolchain", "warning", key, f"{what} {have}: target's {spec!r} is not a version specifier")]
    return [_f("toolchain", "ok" if ok else "error", key, f"{what} {have} ({'satisfies' if ok else 'outside'} {spec})")]


# ---- GPU ----------------------------------------------------------------------------------------


def arch_capability(arch: str) -> str:
    """``sm_90a`` -> ``9.0``, ``sm_121a`` -> ``12.1``; '' when not an sm_ name."""
    m = SM_RE.fullmatch(arch)
    return f"{int(m.group(1))}.{m.group(2)}" if m else ""


def check_gpu(target: Target, snap: Snapshot) -> list[Finding]:
    if target.gpu is None:
        return []
    wanted = {arch_capability(a): a for a in target.gpu.archs}
    devices = snap.area("gpu").get("devices") or []
    names = ", ".join(target.gpu.archs)
    if not devices:
        why = snap.area("gpu").get("error") or snap.area("gpu").get("reason") or "none reported"
        return [_f("gpu", "error", "gpu.devices", f"no NVIDIA GPU found ({why}); target runs on {names}")]
    out = []
    for dev in devices:
        cap = str(dev.get("compute_capability") or "")
        label = f"GPU {dev.get('index')} {dev.get('name')} (compute capability {cap})"
        if cap in wanted:
            out.append(_f("gpu", "ok", "gpu.arch", f"{label} is {wanted[cap]}"))
        else:
            out.append(_f("gpu", "error", "gpu.arch", f"{label} is not among the target's archs: {names}"))
        sms = int(dev.get("sm_count") or 0)
        if sms and target.gpu.sm_count and sms != target.gpu.sm_count:
            out.append(
                _f(
                    "gpu",
                    "warning",
                    "gpu.sm_count",
                    f"{label} has {sms} SMs, the target is sized for {target.gpu.sm_count}",
                )
            )
    return out


# ---- lock ---------------------------------------------------------------------------------------


def _markers(snap: Snapshot) -> dict[str, str]:
    interp = snap.area("python").get("interpreter") or {}
    return {str(k): str(v) for k, v in (interp.get("markers") or {}).items()}


def _applies(pkg: LockedPackage, env: Mapping[str, str]) -> bool:
    if not pkg.marker:
        return True
    from packaging.markers import InvalidMarker, Marker

    try:
        return bool(Marker(pkg.marker).evaluate(dict(env)))
    except InvalidMarker:
        return True


def _installed_source(dist: Mapping[str, Any]) -> tuple[str, str]:
    """(kind, detail): ("index", ""), ("vcs", commit), ("dir", url), ("url", url)."""
    url = dist.get("direct_url") or {}
    if not url:
        return "index", ""
    if (url.get("vcs_info") or {}).get("commit_id"):
        return "vcs", str(url["vcs_info"]["commit_id"])
    if "dir_info" in url:
        return "dir", str(url.get("url", ""))
    return "url", str(url.get("url", ""))


def _check_locked(pkg: LockedPackage, dist: Mapping[str, Any] | None) -> Finding:
    key = f"lock.{pkg.name}"
    if dist is None:
        return _f("lock", "error", key, f"{pkg.name} {pkg.version}: locked, not installed")
    have = str(dist.get("version") or "")
    if have != pkg.version:
        return _f("lock", "error", key, f"{pkg.name}: installed {have}, locked {pkg.version}")
    kind, detail = _installed_source(dist)
    if pkg.vcs is not None and (kind != "vcs" or detail != pkg.vcs.commit):
        got = f"{kind} {detail}".strip()
        return _f(
            "lock",
            "error",
            key,
            f"{pkg.name} {have}: wrong source: locked {pkg.vcs.url}@{pkg.vcs.commit}, installed from {got}",
        )
    if pkg.vcs is None and pkg.artifacts and kind in ("vcs", "dir"):
        return _f(
            "lock",
            "error",
            key,
            f"{pkg.name} {have}: wrong source: installed from {kind} {detail}, locked from {pkg.origin or 'an index'}",
        )
    return _f("lock", "ok", key, f"{pkg.name} {have}")


def check_lock(lock: Lock, snap: Snapshot) -> list[Finding]:
    dists = snap.area("python").get("distributions") or {}
    env = _markers(snap)
    applicable = [p for p in lock.packages if _applies(p, env)]
    results = [_check_locked(p, dists.get(p.name)) for p in applicable]
    out = [f for f in results if f.severity != "ok"]
    passed = len(results) - len(out)
    out.append(_f("lock", "ok", "lock", f"{passed} of {len(applicable)} locked distributions installed as locked"))
    extra = sorted(set(dists) - {p.name for p in lock.packages})
    if extra:
        shown = ", ".join(extra[:10]) + (f" (+{len(extra) - 10} more)" if len(extra) > 10 else "")
        out.append(
            _f("lock", "warning", "lock.extra", f"{len(extra)} installed distribution(s) not in the lock: {shown}")
        )
    return out


def load_target_lock(spec: Spec, target: str, platform: str) -> tuple[Lock | None, str, list[Finding]]:
    path = layout.lock_path(spec.root, target, platform)
    shown = str(path.relative_to(spec.root)) if path.is_relative_to(spec.root) else str(path)
    if not path.is_file():
        return (
            None,
            shown,
            [
                _f(
                    "lock",
                    "error",
                    "lock",
                    f"no lock for {target} on {platform}: {shown} is missing "
                    f"(run `megacpp-env lock resolve {target}`); installed distributions cannot be checked",
                )
            ],
        )
    try:
        return read_pylock(path), shown, []
    except (LockFormatError, OSError) as exc:
        return None, shown, [_f("lock", "error", "lock", f"{shown}: unreadable: {exc}")]


# ---- installed files, sources, runtime ----------------------------------------------------------


def check_installed_files(snap: Snapshot) -> list[Finding]:
    out = []
    dists = snap.area("python").get("distributions") or {}
    for key, dist in sorted(dists.items()):
        integ = dist.get("integrity") or {}
        for kind in ("modified", "removed", "added"):
            files = integ.get(kind) or []
            if files:
                count = integ.get(f"{kind}_count", len(files))
                shown = ", ".join(files[:5]) + (f" (+{count - 5} more)" if count > 5 else "")
                out.append(
                    _f(
                        "installed",
                        "error",
                        f"installed.{key}.{kind}",
                        f"{dist.get('name')} {dist.get('version')}: {count} file(s) {kind} since install: {shown}",
                    )
                )
    for location, names in (snap.area("python").get("unowned_site_files") or {}).items():
        pth = [n for n in names if n.endswith(".pth") and not fnmatch.fnmatch(n, HOOK_GLOB)]  # our hook is expected
        if pth:
            out.append(
                _f(
                    "installed",
                    "warning",
                    "installed.unowned",
                    f"{location}: .pth file(s) no distribution installed: {', '.join(pth)}",
                )
            )
    if not out:
        out.append(_f("installed", "ok", "installed", f"{len(dists)} distributions match their RECORD"))
    return out


def _check_source(source: Source, checkout: Mapping[str, Any] | None, snap: Snapshot) -> list[Finding]:
    key = f"sources.{source.name}"
    if checkout is None:
        if source.install == "path":
            return [
                _f(
                    "sources",
                    "error",
                    key,
                    f"{source.name}: no checkout found (install: path needs a real "
                    f".git checkout at {source.commit[:12]}; run `megacpp-env checkout {source.name}`)",
                )
            ]
        return [_f("sources", "info", key, f"{source.name}: no checkout on this machine (installed as a wheel)")]
    if checkout.get("error"):
        return [_f("sources", "error", key, f"{source.name}: {checkout['error']}")]
    if not checkout.get("has_git"):
        return [_f("sources", "error", key, f"{source.name}: checkout has no .git ({checkout.get('path')})")]
    out = []
    if checkout.get("head") != source.commit:
        out.append(
            _f(
                "sources",
                "error",
                key,
                f"{source.name}: HEAD {show(checkout.get('head'))[:12]}, pin {source.commit[:12]}",
            )
        )
    overlay = checkout.get("overlay_status") or {}
    if source.overlay and overlay.get("state") != "applied":
        out.append(
            _f(
                "sources",
                "error",
                f"{key}.overlay",
                f"{source.name}: overlay {source.overlay} is {overlay.get('state', 'unknown')}",
            )
        )
    elif checkout.get("dirty") and not source.overlay:
        out.append(_f("sources", "error", key, f"{source.name}: local changes (diff {checkout.get('diff_hash')})"))
    return out or [_f("sources", "ok", key, f"{source.name}: at its pin {source.commit[:12]}")]


def check_sources(target: Target, snap: Snapshot) -> list[Finding]:
    checkouts = snap.area("checkouts")
    return [f for s in target.sources for f in _check_source(s, checkouts.get(s.name), snap)]


def _same_setting(name: str, have: str | None, want: str) -> bool:
    """Equal values; for a runtime patch gate (``MEGACPP_PATCH_*``), the same on/off as the runtime
    reads it (``megacpp_env.runtime.gate_on``): unset, ``0`` and ``off`` are all off."""
    if have == want:
        return True
    if not name.startswith(GATE_PREFIX):
        return False
    from megacpp_env.runtime import gate_on

    return gate_on(name, {name: have or ""}) == gate_on(name, {name: want})


def check_runtime(target: Target, snap: Snapshot) -> list[Finding]:
    env = snap.area("env").get("variables") or {}
    out = []
    for name, want in sorted(target.runtime_env.items()):
        have = env.get(name)
        sev = "ok" if _same_setting(name, have, want) else "warning"
        out.append(_f("runtime", sev, f"runtime.env.{name}", f"env {name}: {show(have)} (target sets {want})"))
    hooks = snap.area("runtime").get("hook_files") or {}
    if target.runtime_patches and not hooks:
        out.append(
            _f(
                "runtime",
                "warning",
                "runtime.hook",
                f"runtime patches {', '.join(target.runtime_patches)}: the megacpp_env_runtime .pth hook is "
                "not installed in the inspected interpreter",
            )
        )
    return out


def run_doctor(spec: Spec, target_name: str, snap: Snapshot) -> DoctorReport:
    target = spec.target(target_name)
    platform = live_platform(snap)
    findings: list[Finding] = []
    if platform not in target.platforms:
        findings.append(
            _f(
                "platform",
                "error",
                "platform",
                f"this machine is {platform}; target {target_name} builds for {', '.join(target.platforms)}",
            )
        )
    findings += check_toolchain(target, snap) + check_gpu(target, snap)
    # On another platform (e.g. doctor gb10 on an x86_64 box) compare against the target's own lock:
    # aligned platforms resolve to the same versions, and a lock path for a platform the target does
    # not have would only ever be "missing".
    lock_platform = platform if platform in target.platforms else target.platforms[0]
    lock, lock_shown, lock_findings = load_target_lock(spec, target_name, lock_platform)
    findings += lock_findings + (check_lock(lock, snap) if lock else [])
    findings += check_installed_files(snap) + check_sources(target, snap) + check_runtime(target, snap)
    order = list(AREA_CODES)
    ranked = sorted(findings, key=lambda f: (order.index(f.area), RANK.index(f.severity), f.key))
    checked = [c for a, c in AREA_CODES.items() if a in _WHAT]
    found = suppress.apply(
        spec, ranked, suppress.declared(spec, target=target_name), checked=checked, known=None, whole_run=True
    )
    return DoctorReport(target=target_name, platform=platform, lock=lock_shown, findings=tuple(found))
