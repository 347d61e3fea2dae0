"""A pass-through front for `cargo lambda watch`, used by scripts/schemathesis.sh, that adds the one
thing API Gateway does at its edge and watch does not: a request body that is not UTF-8 text reaches
the function base64-encoded (`isBase64Encoded: true`). watch instead answers its own 500 when a body
sent as `text/*` or `application/json` is not UTF-8, before any function runs. So such a body is
forwarded as `application/octet-stream`, which watch base64-encodes; the function then sees the same
bytes API Gateway would hand it, and answers for itself (400: not JSON). Everything else, status,
headers and body, passes through unchanged.

    python3 apigw_edge.py LISTEN_PORT WATCH_PORT
"""
import http.client
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"host", "connection", "keep-alive", "content-length", "transfer-encoding"}


class Edge(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream_port = 0

    def forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = [(k, v) for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP]
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            headers = [(k, v) for k, v in headers if k.lower() != "content-type"]
            headers.append(("Content-Type", "application/octet-stream"))
        upstream = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=120)
        upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        upstream.putheader("Host", self.headers.get("Host", "localhost"))
        for k, v in headers:
            upstream.putheader(k, v)
        upstream.putheader("Content-Length", str(len(body)))
        upstream.endheaders(body)
        response = upstream.getresponse()
        data = response.read()
        self.send_response_only(response.status, response.reason)
        for k, v in response.getheaders():
            if k.lower() not in HOP_BY_HOP:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        upstream.close()

    def __getattr__(self, name):
        # Every method goes through, TRACE and made-up ones included: the API decides, not this front.
        if name.startswith("do_"):
            return self.forward
        raise AttributeError(name)

    def log_message(self, fmt, *args):
        pass


if __name__ == "__main__":
    listen, upstream = int(sys.argv[1]), int(sys.argv[2])
    Edge.upstream_port = upstream
    ThreadingHTTPServer(("127.0.0.1", listen), Edge).serve_forever()
