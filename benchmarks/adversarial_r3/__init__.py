"""Round-3 adversarial classes (issue 19): one module per area, each with ``run(tmp) -> dict[str, int]``."""
