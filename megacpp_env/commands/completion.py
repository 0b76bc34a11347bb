"""`megacpp-env completion SHELL`: print the shell completion script shipped with the package.

The scripts in ``megacpp_env/completions/`` are generated from the full argument parser by shtab
(``python scripts/completions.py``; ``tests/test_completion.py`` checks they are current), so
completing needs no library at run time: bash and zsh only source a file.
"""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import add_epilog


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_epilog(
        parser,
        "install:\n"
        "  bash: megacpp-env completion bash > ~/.local/share/bash-completion/completions/megacpp-env\n"
        "  zsh:  megacpp-env completion zsh > ~/.zfunc/_megacpp-env   (with fpath+=(~/.zfunc) before compinit)\n"
        "  fish: megacpp-env completion fish > ~/.config/fish/completions/megacpp-env.fish\n"
        "target and source names come from the spec found upward (megacpp-env completion --names KIND)",
    )
    from megacpp_env.completions import FILES, NAME_KINDS

    parser.add_argument("shell", nargs="?", choices=sorted(FILES), help="the shell to complete in")
    parser.add_argument(
        "--names", choices=NAME_KINDS, metavar="KIND",
        help="print the spec's target or source names, one a line (what the scripts complete with)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from megacpp_env.completions import script
    from megacpp_env.errors import EXIT_USAGE

    if args.names:
        return _names(args)
    if not args.shell:
        print("megacpp-env completion: name a shell (bash, fish, zsh) or --names targets|sources", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(script(args.shell))
    return 0


def _names(args: argparse.Namespace) -> int:
    """The names, or nothing: a completion never prints an error into the user's command line."""
    from megacpp_env.commands._common import load
    from megacpp_env.errors import MegacppEnvError

    try:
        spec = load(args)
    except MegacppEnvError:
        return 1
    names = spec.targets if args.names == "targets" else spec.sources
    sys.stdout.write("".join(f"{name}\n" for name in names))
    return 0
