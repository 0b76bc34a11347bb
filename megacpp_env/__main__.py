from __future__ import annotations

from megacpp_env.cli import main

raise SystemExit(main())
