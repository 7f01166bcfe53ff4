"""One sample of a paired overhead measurement: how long a request to a tiny HTTP server on
loopback takes, directly (`serve.py direct`) or through a forwarding proxy (`serve.py proxy`).

Each sample starts the server (and the proxy) inside the container, sends 5 warm-up requests,
then 30 timed ones, and writes the median latency in milliseconds to results.json. The proxy
logs each request it forwards to proxy.log in the output folder (`PASSTHROUGH GET / -> 200`):
the claim's evidence that the traffic went through it (the manifest's `evidence`). dotlab-hpc
runs the samples of both variants alternately in one job on one node, and compares the
proxy's median with the direct one's.
"""

import http.client
import http.server
import json
import os
import statistics
import sys
import threading
import time

WARMUP, REQUESTS = 5, 30


class Hello(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else each reply waits for a delayed ACK (about 40 ms)

    def do_GET(self):
        body = b"hello\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve(handler):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def proxy_to(port, log):
    class Forward(Hello):
        def do_GET(self):
            upstream = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            upstream.request("GET", self.path)
            reply = upstream.getresponse()
            body = reply.read()
            upstream.close()
            log.write(f"PASSTHROUGH {self.command} {self.path} -> {reply.status}\n")
            self.send_response(reply.status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Forward


def timed(port):
    """The latencies of the timed requests to ``port``, in milliseconds, after the warm-up."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    latencies = []
    for i in range(WARMUP + REQUESTS):
        start = time.perf_counter()
        conn.request("GET", "/")
        conn.getresponse().read()
        if i >= WARMUP:
            latencies.append((time.perf_counter() - start) * 1000.0)
    conn.close()
    return latencies


def main():
    variant = sys.argv[1]
    out_dir = os.environ["DOTLAB_OUT_DIR"]
    if variant not in ("direct", "proxy"):
        sys.exit(f"serve.py: direct or proxy, not {variant!r}")
    port = serve(Hello)
    if variant == "proxy":
        with open(os.path.join(out_dir, "proxy.log"), "w", buffering=1) as log:  # line by line
            latencies = timed(serve(proxy_to(port, log)))
    else:
        latencies = timed(port)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"latency_ms": statistics.median(latencies)}, f)


main()
