#!/usr/bin/env python3
"""Serves the dashboard assets with the gateway's URL layout and answers
/admin/stats with sample-stats.json, so the page can be worked on and
checked (check.mjs) without a gateway.

  usage: tests/dashboard/serve-sample.py [--port 0] [--key KEY] [--status 503] [--empty]

--key asks for HTTP Basic admin:KEY on every path, as the gateway does with
auth on; --status makes /admin/stats fail with that status (the page must
show a banner); --empty answers a window with no traffic (empty states).
The sample's timestamps are moved to end now, so the time axes look live.
Prints the address it bound on stdout.
"""
import argparse, base64, copy, json, os, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs

HERE = os.path.dirname(os.path.abspath(__file__))
ASSETS = os.path.join(HERE, "..", "..", "gateway", "assets", "dashboard")
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8"}
# What the gateway should send with the page too: the page needs nothing
# outside its own origin, and no inline script or style sheet.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")


def stats(window, empty):
    with open(os.path.join(HERE, "sample-stats.json")) as f:
        d = json.load(f)
    shift = int(time.time() * 1000) - d["now_ms"]
    d["window"] = window
    d["now_ms"] += shift
    d["since_ms"] += shift
    d["buckets"] = [b + shift for b in d["buckets"]]
    if empty:
        zeros = [0] * len(d["buckets"])
        d["totals"] = {k: 0 for k in d["totals"]}
        d["split"], d["ttft"], d["attainment"], d["top_keys"], d["top_teams"] = [], [], [], [], []
        d["spend"] = {k: zeros for k in d["spend"]}
        for b in d["backends"]:
            b.update(requests=0, errors=0, in_flight=0, queued=0, ttft_p50_ms=None, decode_tokens_per_s=None,
                     draft_acceptance=None)
    return d


class Handler(BaseHTTPRequestHandler):
    def send(self, status, ctype, body, extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urlsplit(self.path)
        if self.server.key is not None:
            want = "Basic " + base64.b64encode(f"admin:{self.server.key}".encode()).decode()
            if self.headers.get("Authorization") != want:
                return self.send(401, "text/plain", b"unauthorized\n",
                                 [("WWW-Authenticate", 'Basic realm="switchyard"')])
        if url.path == "/admin/stats":
            window = parse_qs(url.query).get("window", ["1h"])[0]
            if window not in ("1h", "24h", "7d"):
                return self.send(400, "text/plain", b"window must be 1h, 24h or 7d\n")
            if self.server.status:
                return self.send(self.server.status, "text/plain", b"sample failure\n")
            body = json.dumps(stats(window, self.server.empty)).encode()
            return self.send(200, "application/json", body)
        if url.path == "/dashboard":
            name = "index.html"
        elif url.path.startswith("/dashboard/"):
            name = url.path[len("/dashboard/"):]
        else:
            return self.send(404, "text/plain", b"not found\n")
        path = os.path.normpath(os.path.join(ASSETS, name))
        if not path.startswith(os.path.normpath(ASSETS) + os.sep) or not os.path.isfile(path):
            return self.send(404, "text/plain", b"not found\n")
        with open(path, "rb") as f:
            body = f.read()
        ctype = TYPES.get(os.path.splitext(path)[1], "application/octet-stream")
        self.send(200, ctype, body, [("Content-Security-Policy", CSP), ("X-Content-Type-Options", "nosniff")])

    def log_message(self, fmt, *args):
        pass  # quiet: check.mjs reports what matters


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--key")
    p.add_argument("--status", type=int, default=0)
    p.add_argument("--empty", action="store_true")
    a = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    server.key, server.status, server.empty = a.key, a.status, a.empty
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
