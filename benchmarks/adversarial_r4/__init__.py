"""Round-4 adversarial classes (issue 31): one module per area, each with ``run(tmp) -> dict[str, int]``."""
