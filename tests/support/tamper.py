"""A hostile registry for tests: a proxy on loopback in front of the real local registry that
passes every request through but lets a test change what one path serves (another manifest for
a pinned digest, a blob with a byte flipped), headers and all, as a compromised or broken
registry would. The real registry underneath is never changed, so other tests are unaffected.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# (request path, upstream body) -> the body to serve instead, or None to pass it through
Rewrite = Callable[[str, bytes], bytes | None]
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_PASSED = ("Content-Type", "Docker-Content-Digest", "Docker-Distribution-Api-Version")


@contextmanager
def tampering_registry(upstream: str, rewrite: Rewrite) -> Iterator[str]:
    """A proxy to ``upstream`` (``host:port``) on 127.0.0.1; yields its ``host:port``.
    GET and HEAD only: what a pull does."""

    class Proxy(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _relay(self, send_body: bool) -> None:
            kept = {
                k: v for k, v in self.headers.items() if k.lower() in ("accept", "authorization")
            }
            req = urllib.request.Request(f"http://{upstream}{self.path}", headers=kept)
            try:
                with _OPENER.open(req, timeout=60) as r:
                    code, headers, body = r.status, r.headers, r.read()
            except urllib.error.HTTPError as e:
                code, headers, body = e.code, e.headers, e.read()
            changed = rewrite(self.path, body) if code == 200 else None
            self.send_response(code)
            for name in _PASSED:  # a liar keeps the headers of what it was asked for
                if headers.get(name):
                    self.send_header(name, headers[name])
            out = body if changed is None else changed
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            if send_body:
                self.wfile.write(out)

        def do_GET(self) -> None:
            self._relay(True)

        def do_HEAD(self) -> None:
            self._relay(False)

    with serving(Proxy) as address:
        yield address


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on 127.0.0.1 (a free port) in a thread; yields ``host:port``."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
