"""Build one pinned source into a wheel: the one code path for Docker images and bare metal.

``build_source(plan, ...)`` (``srcbuild.build``) checks the source out (from a source mirror when
given), verifies it against its pin, applies and verifies its overlay, runs its ``pre_build``
commands, builds a wheel with no build isolation and no index (its build env plus the jobs the
machine can afford), and optionally installs it and runs its sanity checks. The plan it reads
(``srcbuild.plan``) is a plain JSON file rendered from the spec, so images run this package as
``python -m megacpp_env.srcbuild build --plan FILE`` with no spec, no YAML and no template.

This package and the modules it imports (its *import closure*, ``srcbuild.closure``) are all an
image's source stages copy of the tool: a change elsewhere in the tool rebuilds no source. Stdlib
only at import time; nothing here prints or exits except ``__main__``.
"""
