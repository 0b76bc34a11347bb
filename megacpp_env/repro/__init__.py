"""Rebuild a golden environment and guard every benchmark with it.

A golden snapshot says *what* an environment was; ``capture`` (run when a golden is stored) keeps
what is needed to make it again: each checkout's uncommitted diff and untracked files
(content-addressed, beside the golden), the distributions with their installers, wheel tags and
artifact hashes, the build records of locally built wheels and the ``.pth`` path entries.
``reproduce`` re-creates the checkouts and the virtual environment from that and proves the result
against the golden in a location-independent way (``portable``); ``guard`` (``run --golden``) and
``bisect`` refuse a drifted environment before a benchmark or a bisect step runs.

Above ``snapshot``, ``checkout``, ``lock`` and the tool wrappers (like ``doctor``); never prints,
never exits.
"""
