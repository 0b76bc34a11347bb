"""One module per verb: ``add_arguments(parser)`` and ``run(args) -> int``. Parsing lives in cli.py."""
