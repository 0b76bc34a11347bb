"""The pip mirror a build's deps step installs from (``build --mirror DIR``): served read-only on
127.0.0.1 for the duration of the build. Never prints."""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from megacpp_env.errors import RefusedError


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mirror_links(directory: str) -> str:
    """The flat find-links directory of a `megacpp-env mirror` tree (``DIR/files``), else DIR itself."""
    try:
        from megacpp_env.lock.mirror import links_dir
    except ImportError:
        return directory
    files = links_dir(Path(directory))
    return str(files) if files.is_dir() else directory


@contextlib.contextmanager
def serve_mirror(directory: str, port: int) -> Iterator[None]:
    """Serve a local mirror directory read-only on 127.0.0.1:port for the duration of a build."""
    if not Path(directory).is_dir():
        raise RefusedError(f"--mirror {directory}: not a directory")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=directory, **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
