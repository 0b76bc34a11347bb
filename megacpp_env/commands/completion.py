"""`megacpp-env completion SHELL`: print the shell completion script shipped with the package.

The scripts in ``megacpp_env/completions/`` are generated from the full argument parser by shtab
(``python scripts/completions.py``; ``tests/test_completion.py`` checks they are current), so
completing needs no library at run time: bash and zsh only source a file.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "install:\n"
        "  bash: megacpp-env completion bash > ~/.local/share/bash-completion/completions/megacpp-env\n"
        "  zsh:  megacpp-env completion zsh > ~/.zfunc/_megacpp-env   (with fpath+=(~/.zfunc) before compinit)"
    )
    from megacpp_env.completions import FILES

    parser.add_argument("shell", choices=sorted(FILES), help="the shell to complete in")


def run(args: argparse.Namespace) -> int:
    from megacpp_env.completions import script

    sys.stdout.write(script(args.shell))
    return 0
