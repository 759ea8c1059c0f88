"""A plain HTTP forward proxy on loopback for the proxy tests: it takes
`GET http://host:port/path` (absolute-form, no CONNECT), forwards it to that
server with one added header (`X-Forwarded-By: mediafs-test-proxy`, so the
server can tell what came through here), and records what it received.

Pure standard library; a daemon thread per connection; stop() closes it.
"""

import http.client
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MARK_HEADER = "X-Forwarded-By"
MARK = "mediafs-test-proxy"
# Never forwarded: they describe this hop, not the request.
HOP_BY_HOP = {"connection", "proxy-connection", "keep-alive", "proxy-authorization", "proxy-authenticate",
              "te", "trailer", "transfer-encoding", "upgrade"}


@dataclass(frozen=True)
class ProxiedRequest:
    method: str
    url: str
    headers: dict


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self._forward("GET")

    def do_HEAD(self):
        self._forward("HEAD")

    def do_CONNECT(self):
        self._record("CONNECT")
        self.send_response_only(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _record(self, method):
        with self.server.lock:
            self.server.requests.append(ProxiedRequest(method, self.path, dict(self.headers.items())))

    def _forward(self, method):
        self._record(method)
        target = urllib.parse.urlsplit(self.path)
        if target.scheme != "http" or not target.hostname:
            self.send_response_only(400)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        headers[MARK_HEADER] = MARK
        upstream = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=30)
        try:
            upstream.request(method, (target.path or "/") + (f"?{target.query}" if target.query else ""),
                             headers=headers)
            response = upstream.getresponse()
            body = response.read()
        except OSError:
            self.send_response_only(502)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        finally:
            upstream.close()
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in HOP_BY_HOP and (method == "HEAD" or name.lower() != "content-length"):
                self.send_header(name, value)
        if method != "HEAD":
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(body)


class ForwardProxy:
    def __init__(self):
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.lock = threading.Lock()
        self._server.requests = []
        self._thread = None

    @property
    def port(self):
        return self._server.server_address[1]

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    @property
    def requests(self):
        with self._server.lock:
            return list(self._server.requests)

    def start(self):
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()
