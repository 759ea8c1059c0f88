"""An S3 front for the tests: checks each request's SigV4 signature with
botocore's own signer (botocore.auth.S3SigV4Auth), then passes it to a moto
server, so a wrong signature, key, token or region fails a test however moto
itself checks. It records what it received (method, path, query, Range,
whether signed, the status it answered) so tests can count requests.

moto runs in server mode as a subprocess (`python -m moto.server`), started
and stopped by pid; the variables this environment sets for TLS (CA bundles)
are removed from its environment only. The bench starts its moto here too,
filled by bench/motoserve.py before it answers.

Rules, as S3 applies them:
- signed: the access key must be known (else 403 InvalidAccessKeyId), the
  credential scope's region and service must be the bucket's and `s3`
  (else 400 AuthorizationHeaderMalformed naming the region), the session
  token must be the key's and signed (else 403 InvalidToken, or 400
  ExpiredToken once `expire()`d), x-amz-content-sha256 must be sent and
  signed (else 400 InvalidRequest), the signature must match (else 403
  SignatureDoesNotMatch);
- unsigned: only buckets in `public` are listed (else 403 AccessDenied);
  moto decides on their objects (their ACL).
"""

import http.client
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

import harness

TLS_VARIABLES = ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE",
                 "NIX_SSL_CERT_FILE", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY",
                 "all_proxy")
AUTH = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                  r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$")


def clean_env(**extra):
    """This process's environment without the TLS and proxy variables that
    break plain-http S3 tools, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in TLS_VARIABLES and not k.startswith("AWS_")}
    env.update(extra)
    return env


def own_aws_environment(monkeypatch, directory, key=None):
    """Replaces this process's AWS variables (and so a mount's, which
    inherits them) with the test's own: no credentials or config file of
    the machine's, and `key` = (id, secret) when given."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(directory / "none-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(directory / "none-config"))
    if key:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key[0])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key[1])


@dataclass
class Seen:
    method: str
    path: str        # raw, percent-encoded, without the query
    query: dict
    range: str
    signed: bool
    status: int = 0
    refused: str = ""  # the error code answered, with what the check computed
    headers: dict = None
    sent: int = 0      # body bytes passed on to the client
    at: float = 0.0    # time.monotonic() on arrival


@dataclass
class Key:
    secret: str
    token: str = None
    expired: bool = False


class MotoServer:
    """`python -m moto.server` on a free loopback port; stop() by pid.

    Or, given `filler`, the argv of a program that fills moto's backend in
    its own process before it serves (bench/motoserve.py: 100,000 objects
    put through moto's HTTP API took 5.5 minutes, straight into its backend
    4 s): run as `filler + [port]`, its stderr to `log`, it prints "ready"
    once serving and exits when its stdin closes, so it never outlives its
    starter."""

    def __init__(self, filler=None, log=None):
        self.port = harness.free_port()
        if filler is not None:
            self._start_filled(filler, log)
            return
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env=clean_env())
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("moto server did not start")
                time.sleep(0.1)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def client(self):
        """A boto3 client straight to moto, for fixtures."""
        import boto3
        from botocore.config import Config
        return boto3.client("s3", endpoint_url=self.url, region_name="us-east-1", aws_access_key_id="fixture",
                            aws_secret_access_key="fixture", verify=False,
                            config=Config(proxies={}, s3={"addressing_style": "path"}))

    def _start_filled(self, filler, log):
        with open(log, "w") as err:
            self.proc = subprocess.Popen([*filler, str(self.port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, env=clean_env(), text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.stop()
            raise RuntimeError(f"moto did not start (said {line!r}); see {log}")

    def stop(self):
        if self.proc.stdin:
            # A filled moto exits once its stdin closes.
            self.proc.stdin.close()
            harness.stop_popen(self.proc)
            return
        # moto's server runs until signalled: no wait for it to exit first.
        harness.stop_popen(self.proc, timeout=0)


class CheckingProxy:
    """The signature-checking front; `url` is what mediafs is pointed at."""

    def __init__(self, upstream_port, region="us-east-1"):
        self.upstream_port = upstream_port
        self.region = region
        self.keys = {}
        self.public = set()
        self.seen = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                proxy.handle(self)

            def do_HEAD(self):
                proxy.handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="s3proxy", daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def add_key(self, key_id, secret, token=None):
        self.keys[key_id] = Key(secret, token)

    def expire(self, key_id):
        self.keys[key_id].expired = True

    def requests(self, method=None, list_only=None):
        with self.lock:
            seen = list(self.seen)
        if method:
            seen = [s for s in seen if s.method == method]
        if list_only is not None:
            seen = [s for s in seen if ("list-type" in s.query) == list_only]
        return seen

    def clear(self):
        with self.lock:
            self.seen.clear()

    # -------------------------------------------------------------- checking

    def refusal(self, handler, path):
        """None when the request may pass, else (status, code, message, extra XML)."""
        header = handler.headers.get("Authorization")
        if header is None:
            bucket = urllib.parse.unquote(path.split("/")[1]) if path.count("/") >= 1 else ""
            if bucket in self.public:
                return None
            return 403, "AccessDenied", "Access Denied", ""
        match = AUTH.match(header)
        if not match:
            return 400, "AuthorizationHeaderMalformed", "The authorization header is malformed", ""
        key_id, day, region, service, signed_headers, signature = match.groups()
        key = self.keys.get(key_id)
        if key is None:
            return 403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.", ""
        if region != self.region or service != "s3":
            return (400, "AuthorizationHeaderMalformed",
                    f"the region '{region}' is wrong; expecting '{self.region}'", f"<Region>{self.region}</Region>")
        amz_date = handler.headers.get("x-amz-date", "")
        if not amz_date.startswith(day):
            return 403, "SignatureDoesNotMatch", "x-amz-date and the credential's date differ", ""
        names = signed_headers.split(";")
        if key.token is not None:
            if handler.headers.get("x-amz-security-token") != key.token or "x-amz-security-token" not in names:
                return 403, "InvalidToken", "The provided token is malformed or otherwise invalid.", ""
            if key.expired:
                return 400, "ExpiredToken", "The provided token has expired.", ""
        if "host" not in names:
            return 403, "SignatureDoesNotMatch", "the Host header is not signed", ""
        if "x-amz-content-sha256" not in names:
            return 400, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256", ""
        headers = {name: handler.headers.get(name, "") for name in names}
        request = AWSRequest(method=handler.command, url=f"http://{handler.headers['Host']}{handler.path}",
                             headers=headers)
        request.context["timestamp"] = amz_date
        auth = S3SigV4Auth(Credentials(key_id, key.secret, key.token), "s3", region)
        canonical = auth.canonical_request(request)
        expected = auth.signature(auth.string_to_sign(request, canonical), request)
        if expected != signature:
            return (403, "SignatureDoesNotMatch", "The request signature we calculated does not match", "",
                    canonical)
        return None

    def handle(self, handler):
        split = urllib.parse.urlsplit(handler.path)
        seen = Seen(handler.command, split.path, dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True)),
                    handler.headers.get("Range", ""), "Authorization" in handler.headers,
                    headers=dict(handler.headers.items()), at=time.monotonic())
        with self.lock:
            self.seen.append(seen)
        refusal = self.refusal(handler, split.path)
        if refusal:
            status, code, message, extra = refusal[:4]
            seen.refused = code + ("\n" + refusal[4] if len(refusal) > 4 else "")
            body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}'
                    f"</Message>{extra}<RequestId>test</RequestId></Error>").encode()
            seen.status = status
            handler.send_response(status)
            handler.send_header("Content-Type", "application/xml")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            if handler.command != "HEAD":
                handler.wfile.write(body)
            return
        self.forward(handler, seen)

    def forward(self, handler, seen):
        upstream = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=60)
        # moto checks no signature, but takes a request without one as
        # anonymous and refuses it a private object.
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("connection", "host")}
        upstream.request(handler.command, handler.path, headers=headers)
        answer = upstream.getresponse()
        seen.status = answer.status
        handler.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in ("connection", "transfer-encoding", "server", "date"):
                handler.send_header(name, value)
        handler.end_headers()
        if handler.command != "HEAD":
            while chunk := answer.read(1 << 20):
                handler.wfile.write(chunk)
                seen.sent += len(chunk)
        upstream.close()
