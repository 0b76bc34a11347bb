"""Who requires what in a target (the spec, each source's upstream facts, the stack's additions),
the reviewed resolutions that change it (overrides, provides), the conflicts that can be decided
offline, and the post-install dependency check the images run (``python -m megacpp_env.deps.check``)."""
