"""`megacpp-env schema`: print the JSON Schema of stack.yaml (generated from the spec model).

The same text is shipped as ``megacpp_env/schemas/stack.schema.json``; point an editor at it with
``# yaml-language-server: $schema=<path or URL of stack.schema.json>`` on the first line of stack.yaml.
"""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import add_epilog

USE = """\
use:
  megacpp-env schema > stack.schema.json
  first line of stack.yaml: # yaml-language-server: $schema=stack.schema.json"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_epilog(parser, USE)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.spec.schema import render_schema

    sys.stdout.write(render_schema())
    return 0
