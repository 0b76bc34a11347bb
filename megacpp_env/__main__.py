from __future__ import annotations

from megacpp_env.cli import entry

entry()
