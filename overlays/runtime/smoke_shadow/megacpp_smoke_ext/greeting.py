"""Shadow copy of megacpp_smoke_ext/greeting.py, loaded in its place by the smoke_shadow runtime
patch (MEGACPP_PATCH_SMOKE_SHADOW=1). The installed file is never changed."""

SHADOW = True


def greet(name: str) -> str:
    return f"hello, {name} (from the megacpp-env shadow tree)"
