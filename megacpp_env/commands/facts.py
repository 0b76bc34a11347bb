"""``facts extract | check | show``: upstream facts per pinned source (megacpp_env/facts). A group of
real argparse sub-commands, one module each (``commands/facts_<name>.py``)."""

from __future__ import annotations

import argparse

SUBCOMMANDS = {
    "extract": ("facts_extract", "read one source's facts from a checkout at its pin (or an sdist) and write them"),
    "check": ("facts_check", "check every source's committed facts against the spec, offline"),
    "show": ("facts_show", "print one source's committed facts"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The group itself has no options of its own."""
