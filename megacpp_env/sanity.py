"""In-image sanity checks for a built source: imports, statements, vLLM model registry resolution.

Stdlib only (it runs inside images right after a wheel is installed, before anything else is
trusted). Used by the rendered Dockerfiles as (``-P``: the checkout in the working directory must
not shadow the installed package)::

    python -P -m megacpp_env.sanity --source vllm --import vllm --vllm-model Qwen3_5ForCausalLMTextOnly

Each vLLM model class is resolved through vLLM's model registry in this process and again in a
fresh interpreter (a subprocess re-import), and both must name the same class. Exit 0 when every
check passes, 1 otherwise; one line per check on stdout.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True, slots=True)
class Result:
    """One sanity check's outcome: the check (an import, a statement), whether it passed, and why not."""

    check: str
    ok: bool
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "ok": self.ok, "detail": self.detail}

    def line(self) -> str:
        return f"{'ok' if self.ok else 'FAIL'}: {self.check}" + (f" -> {self.detail}" if self.detail else "")


# What this module checks for one source: its ``sanity`` in stack.yaml (``spec.model.Source``), carried
# unchanged in its source build plan (``srcbuild.plan.SourcePlan``). No docstring: the stack.yaml
# schema would take it as the description.
@dataclass(frozen=True, kw_only=True, slots=True)
class SanityCheck:
    imports: tuple[str, ...] = ()
    """Modules imported in the image after install."""
    statements: tuple[str, ...] = ()
    """Python statements run in the image after install."""
    vllm_models: tuple[str, ...] = ()
    """vLLM model architectures that must be registered."""

    def args(self) -> list[str]:
        """The ``python -m megacpp_env.sanity`` arguments for these checks."""
        out: list[str] = []
        for flag, values in (("--import", self.imports), ("--statement", self.statements)):
            for value in values:
                out += [flag, value]
        for model in self.vllm_models:
            out += ["--vllm-model", model]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "imports": list(self.imports),
            "statements": list(self.statements),
            "vllm_models": list(self.vllm_models),
        }


def check_import(module: str) -> Result:
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # any import failure is a finding, reported with its type
        return Result(check=f"import {module}", ok=False, detail=f"{type(exc).__name__}: {exc}")
    return Result(check=f"import {module}", ok=True, detail=str(getattr(mod, "__file__", "") or "namespace"))


def _namespace(imports: Sequence[str]) -> dict[str, Any]:
    ns: dict[str, Any] = {}
    for module in imports:
        top = module.split(".", 1)[0]
        try:
            importlib.import_module(module)
            ns[top] = importlib.import_module(top)
        except Exception:  # noqa: S112 - the failure is reported by check_import
            continue
    return ns


def check_statement(statement: str, ns: dict[str, Any]) -> Result:
    try:
        exec(compile(statement, "<sanity>", "exec"), ns)  # noqa: S102 - the spec's own sanity statement
    except Exception as exc:
        return Result(check=statement, ok=False, detail=f"{type(exc).__name__}: {exc}")
    return Result(check=statement, ok=True)


def resolve_vllm_model(name: str) -> str:
    """The fully qualified class vLLM's model registry resolves ``name`` to (raises if it cannot)."""
    from vllm import ModelRegistry  # type: ignore[import-not-found,unused-ignore]

    archs = set(ModelRegistry.get_supported_archs())
    if name not in archs:
        raise LookupError(f"{name} is not in vLLM's model registry ({len(archs)} architectures)")
    loader = getattr(ModelRegistry, "_try_load_model_cls", None)
    cls = loader(name) if loader is not None else None
    if cls is None:
        raise LookupError(f"vLLM's model registry lists {name} but cannot load its class")
    return f"{cls.__module__}.{cls.__qualname__}"


def check_vllm_model(name: str, *, subprocess_too: bool = True) -> list[Result]:
    label = f"vllm model {name}"
    try:
        here = resolve_vllm_model(name)
    except Exception as exc:
        return [Result(check=label, ok=False, detail=f"{type(exc).__name__}: {exc}")]
    out = [Result(check=label, ok=True, detail=here)]
    if subprocess_too:
        out.append(_check_in_subprocess(name, here))
    return out


def _check_in_subprocess(name: str, expected: str) -> Result:
    label = f"vllm model {name} (fresh interpreter)"
    # -P: the working directory (often the source checkout itself) must not shadow the installed package.
    argv = [sys.executable, "-P", "-m", "megacpp_env.sanity", "--vllm-model", name, "--no-subprocess", "--json"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    try:
        results = json.loads(proc.stdout)["results"]
        got = results[0]["detail"] if results and results[0]["ok"] else ""
    except (ValueError, KeyError, IndexError, TypeError):
        got = ""
    if proc.returncode != 0 or got != expected:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return Result(check=label, ok=False, detail=got or " | ".join(tail) or f"exit {proc.returncode}")
    return Result(check=label, ok=True, detail=got)


def run_checks(
    *, imports: Sequence[str], statements: Sequence[str], vllm_models: Sequence[str], subprocess_too: bool = True
) -> list[Result]:
    results = [check_import(m) for m in imports]
    ns = _namespace(imports)
    results += [check_statement(s, ns) for s in statements]
    for model in vllm_models:
        results += check_vllm_model(model, subprocess_too=subprocess_too)
    return results


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m megacpp_env.sanity", description=__doc__.splitlines()[0])
    p.add_argument("--source", default="", help="the source these checks belong to (for the report)")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE")
    p.add_argument("--statement", dest="statements", action="append", default=[], metavar="PYTHON")
    p.add_argument("--vllm-model", dest="vllm_models", action="append", default=[], metavar="ARCH")
    p.add_argument("--no-subprocess", action="store_true", help="skip the fresh-interpreter re-check")
    p.add_argument("--json", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    results = run_checks(
        imports=args.imports,
        statements=args.statements,
        vllm_models=args.vllm_models,
        subprocess_too=not args.no_subprocess,
    )
    ok = all(r.ok for r in results)
    if args.json:
        doc = {"source": args.source, "ok": ok, "results": [r.to_dict() for r in results]}
        print(json.dumps(doc, sort_keys=True))
    else:
        prefix = f"[{args.source}] " if args.source else ""
        for r in results:
            print(prefix + r.line())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
