"""Pure Python, so a runtime shadow copy can replace it (the smoke_shadow patch)."""

SHADOW = False


def greet(name: str) -> str:
    return f"hello, {name}"
