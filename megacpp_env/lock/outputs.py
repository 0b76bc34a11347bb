"""The files one lock is written as, rendered offline (no uv): the PEP 751 text and the pip
``--require-hashes`` export with its header, and the command that remakes them."""

from __future__ import annotations

from megacpp_env.lock.pylock import Lock, LockMeta, render_pylock
from megacpp_env.lock.reqtxt import render_requirements


def lock_command(target: str, platform: str) -> str:
    return f"megacpp-env lock resolve {target} --platform {platform}"


def export_header(lock: Lock, export_rel: str) -> str:
    meta = lock.meta or LockMeta()
    return "\n".join(
        [
            f"megacpp-env lock export (generated, do not edit): target {meta.target}, "
            + (f"{meta.part} toolchain, " if meta.part else "")
            + f"platform {meta.platform}, python {meta.python}",
            f"inputs-hash: {meta.inputs_hash}",
            f"made by: {meta.command}",
            "install: pip install --require-hashes --no-deps "
            + ("--target PREFIX " if meta.part else "")
            + f"-r {export_rel}",
        ]
    )


def render_export(lock: Lock, export_rel: str) -> str:
    """The pip ``--require-hashes`` export of one lock, with its header."""
    return render_requirements(lock, header=export_header(lock, export_rel))


def render_outputs(lock: Lock, export_rel: str) -> tuple[str, str]:
    """(pylock text, requirements export text) of one finished lock."""
    return render_pylock(lock), render_export(lock, export_rel)
