"""Upstream facts per pinned source: read statically from the source at its pin by
``megacpp-env facts extract``, committed as ``facts/<source>.toml``, checked offline by ``check``
(``facts check``) and used by ``lock`` (the sources' own requirements) and the policy rules (the
environment variables a build really reads, hard-coded arch lists, build-time fetches, CUTLASS
versions). Nothing here imports torch or runs the source's code."""
