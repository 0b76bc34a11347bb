"""megacpp_smoke_ext: a C function (``add``) and a pure-Python one (``greeting.greet``)."""

from megacpp_smoke_ext._core import add
from megacpp_smoke_ext.greeting import greet

__version__ = "0.1.0"
# The smoke overlay (overlays/smoke-ext/) replaces this value; the image's sanity check reads it.
OVERLAY_MARKER = "upstream"

__all__ = ["OVERLAY_MARKER", "__version__", "add", "greet"]
