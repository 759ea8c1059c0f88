#!/usr/bin/env python3
"""Fault-injecting loopback HTTP/1.1 server for the mediafs test suite.

Pure standard library. In-process use from pytest:

    from faultserver import FaultServer
    srv = FaultServer().start()          # 127.0.0.1, free port, daemon thread
    srv.add("a.bin", data)               # -> URL
    srv.set_fault("a.bin", "drop", after=100_000, times=1)
    ...                                  # point mediafs / urllib at srv.url("a.bin")
    srv.requests                         # snapshot list of Request records
    srv.stop()

FaultServer is also a context manager (``with FaultServer() as srv:``).

Normal behaviour (no fault): GET and HEAD; both send Content-Length,
Content-Type, ETag (from the content hash), Last-Modified (IMF-fixdate, fixed
per content version) and Accept-Ranges: bytes. GET honours a single
`Range: bytes=a-b | a- | -n` with 206 + Content-Range; an unsatisfiable range
gets 416 with `Content-Range: bytes */LEN`; a malformed or multi-range header
is ignored (200, full body). If-Range is honoured (strong ETag or exact
Last-Modified; mismatch -> 200 full body). A GET whose If-None-Match names
the entry's ETag gets 304 with no body (a poll of an unchanged page).
HEAD ignores Range (always 200).
Unknown path -> 404. Connections are kept alive. The body is written in
64 KiB pieces with socket.send, so Request.bytes_sent counts bytes actually
handed to the kernel; a write failing with EPIPE/ECONNRESET marks the record
completed=False. NOTE: a body that fits into the socket buffers (a few hundred
KiB on loopback) is "sent" even if the client never reads it; use bodies of
several MiB when a test must see a cancelled transfer.

Faults, per file name, set with set_fault(name, behaviour, **kwargs) and
cleared with set_fault(name, None); setting a fault resets its counters.
Only requests for the name itself count (not /_real/<name>).

  drop                after=0 body bytes, then shutdown the socket mid-body.
                      times=K: only the first K GETs (default all).
                      rst=True: abort with a TCP RST instead of FIN.
  status_every_other  status=503: GETs number 1, 3, 5... answer `status` with
                      a small text body, GETs 2, 4, ... are normal
                      (first_fails=False flips that). retry_after=S adds
                      Retry-After. HEAD is normal.
  status              status=N for every GET and HEAD; times=K only for the
                      first K requests; retry_after=S; headers={...} extra
                      response headers (e.g. WWW-Authenticate).
  drip                bytes_per_sec=R (default 10_000), chunk=C (default
                      min(R, 4096)), delay=S before the response headers.
                      Stops promptly when the client disconnects or on stop().
  ignore_range        GET always 200 + full body; GET and HEAD without
                      Accept-Ranges.
  other_range         shift=4096: a ranged GET gets 206 for the range moved
                      `shift` bytes later (or earlier when that would pass the
                      end), same length where possible, with an honest
                      Content-Range and the matching bytes.
  redirect            code=302 (301/302/303/307/308): GET/HEAD of /<name> answer
                      `code` with an absolute Location to /_real/<name>, which
                      always serves the file normally. to=BASE_URL: the
                      Location is BASE_URL + _real/<name> instead (another
                      server: another origin). location=URL: exactly this
                      Location (a loop, another scheme).
  change              after=1, new_data=None: once `after` requests (GET or
                      HEAD) for the name have been answered, the content is
                      replaced (by new_data, or the old bytes XOR 0xFF), giving
                      a new ETag and Last-Modified. Happens once.
  short               missing=1000: Content-Length as claimed, but `missing`
                      fewer body bytes are sent, then the connection is closed.
  no_head             HEAD answers 405 (Allow: GET); GET normal.
  hold                a GET waits, before its response headers, until the test
                      lets it go with release(name) (every GET from then on)
                      or release(name, count=K) (the next K GETs, in the
                      order they arrived). For tests of who gets a place
                      next: the order is the test's, not a clock's.
  no_etag             GET/HEAD without an ETag (Last-Modified only); an
                      If-Range naming an ETag then never matches (200).
  no_length           GET/HEAD without Content-Length; the body is
                      close-delimited (Connection: close), or chunked with
                      chunked=True. Ranges still honoured.

Hostile headers (the body stays honest; only the named header lies):
  huge_date           year="99999999999999999": Last-Modified of GET and HEAD
                      is `Sun, 06 Nov <year> 08:49:37 GMT`.
  huge_range_end      end="9223372036854775807": a 206 says
                      `Content-Range: bytes <start>-<end>/*`.
  huge_length         length="9223372036854775807": HEAD and a 200 claim
                      Content-Length <length> (a 200 GET then sends the real
                      body and closes); a 206 claims total <length> in its
                      Content-Range; a 416 says `bytes */<length>`. Ranges are
                      judged against the real length.
  bad_content_range   value="bytes garbage": a 206 sends
                      `Content-Range: <value>`.

CLI for manual use:
    python3 integration/faultserver.py --port 8080 --dir /some/dir \
        --fault a.bin=drop:after=1000,times=2 --fault b.bin=ignore_range
"""

from __future__ import annotations

import argparse
import dataclasses
import email.utils
import hashlib
import http.server
import os
import select
import socket
import struct
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field

CHUNK = 64 * 1024
BASE_MTIME = 1_700_000_000  # 2023-11-14T22:13:20Z; Last-Modified = BASE + 60*version

_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError,
         TimeoutError, OSError)

# behaviour -> allowed kwargs
BEHAVIOURS = {
    "drop": {"after", "times", "rst"},
    "status_every_other": {"status", "retry_after", "first_fails"},
    "status": {"status", "times", "retry_after", "headers"},
    "drip": {"bytes_per_sec", "chunk", "delay"},
    "ignore_range": set(),
    "other_range": {"shift"},
    "redirect": {"code", "to", "location"},
    "change": {"after", "new_data"},
    "short": {"missing"},
    "no_head": set(),
    "no_length": {"chunked"},
    "no_etag": set(),
    "hold": set(),
    "huge_date": {"year"},
    "huge_range_end": {"end"},
    "huge_length": {"length"},
    "bad_content_range": {"value"},
}
HUGE = str(2**63 - 1)  # Int64.max, as hostile servers like to send it


@dataclass
class Request:
    method: str
    path: str                       # raw request target
    name: str                       # decoded file name ("/_real/" stripped)
    range: str | None               # Range request header
    if_range: str | None            # If-Range request header
    headers: dict                   # request headers
    client_port: int                # same port => same (kept-alive) connection
    status: int | None = None
    bytes_sent: int = 0             # body bytes actually written
    completed: bool = False         # whole response written (False while in flight)
    done: bool = False              # handler finished with this request
    response_headers: dict = field(default_factory=dict)
    started: float = 0.0            # time.monotonic()
    finished: float | None = None


@dataclass
class _Entry:
    data: bytes
    content_type: str
    version: int
    etag: str
    last_modified: str


@dataclass
class _Fault:
    kind: str
    kw: dict
    n_all: int = 0    # GET+HEAD requests seen for the name
    n_get: int = 0
    changed: bool = False
    held: list = field(default_factory=list)   # events of GETs on hold, oldest first
    open: bool = False                         # release(name): no more holds


def _make_entry(data: bytes, content_type: str, version: int, mtime=None) -> _Entry:
    data = bytes(data)
    etag = '"%s"' % hashlib.sha256(data).hexdigest()[:24]
    ts = BASE_MTIME + 60 * version if mtime is None else mtime
    return _Entry(data, content_type, version, etag,
                  email.utils.formatdate(ts, usegmt=True))


def parse_range(header: str | None, length: int):
    """-> None (ignore header: full 200), (start, end) inclusive, or 'unsat'."""
    if header is None:
        return None
    h = header.strip()
    if not h.lower().startswith("bytes="):
        return None
    spec = h[6:].strip()
    if "," in spec or "-" not in spec:
        return None
    a, b = (s.strip() for s in spec.split("-", 1))
    try:
        if a == "":
            if not b.isdigit():
                return None
            n = int(b)
            if n == 0 or length == 0:
                return "unsat"
            return (max(0, length - n), length - 1)
        if not a.isdigit() or (b and not b.isdigit()):
            return None
        start = int(a)
        end = int(b) if b else length - 1
    except ValueError:
        return None
    if b and end < start:
        return None
    if start >= length:
        return "unsat"
    return (start, min(end, length - 1))


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "faultserver/1"
    timeout = 60

    # ---- plumbing
    def setup(self):
        super().setup()
        self.fs: FaultServer = self.server.fs
        self.rec: Request | None = None
        self.fs._register(self.connection)

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.fs._unregister(self.connection)

    def log_message(self, fmt, *args):
        if self.fs.verbose:
            sys.stderr.write("faultserver: %s - %s\n" % (self.address_string(), fmt % args))

    def send_header(self, keyword, value):
        if self.rec is not None:
            self.fs._update(self.rec, lambda r: r.response_headers.__setitem__(keyword, str(value)))
        super().send_header(keyword, value)

    def send_response(self, code, message=None):
        if self.rec is not None:
            self.fs._update(self.rec, lambda r: setattr(r, "status", code))
        super().send_response(code, message)

    def do_GET(self):
        self._handle(head=False)

    def do_HEAD(self):
        self._handle(head=True)

    def _handle(self, head):
        target = urllib.parse.urlsplit(self.path).path
        name = urllib.parse.unquote(target.lstrip("/"))
        real = name.startswith("_real/")
        if real:
            name = name[len("_real/"):]
        self.rec = self.fs._begin(self, name)
        ok = False
        try:
            ok = self._serve(name, head, real)
        except _GONE:
            ok = False
        finally:
            if not ok:
                self.close_connection = True
            self.fs._finish(self.rec, ok)
            self.rec = None

    # ---- helpers
    def _simple(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            return self._write(memoryview(body))
        return True

    def _client_gone(self):
        try:
            r, _, _ = select.select([self.connection], [], [], 0)
            if r:
                return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True
        return False

    def _write(self, view, limit=None, rate=None, chunk=CHUNK, chunked=False):
        """Send view[:limit]; True if all of it went out."""
        sock, stop = self.connection, self.fs._stopping
        total = len(view) if limit is None else max(0, min(limit, len(view)))
        off = 0
        while off < total:
            if stop.is_set() or (rate and self._client_gone()):
                return False
            piece = view[off:min(total, off + chunk)]
            if chunked:
                sock.sendall(b"%X\r\n" % len(piece))
            sent = 0
            while sent < len(piece):
                n = sock.send(piece[sent:])
                sent += n
                self.fs._update(self.rec, lambda r, n=n: setattr(r, "bytes_sent", r.bytes_sent + n))
            off += sent
            if chunked:
                sock.sendall(b"\r\n")
            if rate and off < total and stop.wait(len(piece) / rate):
                return False
        return True

    def _abort(self, rst=False):
        self.close_connection = True
        try:
            if rst:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.connection.close()
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # ---- the response
    def _serve(self, name, head, real):
        entry, fault, n_all, n_get = self.fs._lookup(name, head, real)
        if entry is None:
            return self._simple(404, b"not found\n")
        kind = fault.kind if fault else None
        kw = fault.kw if fault else {}

        if kind == "status":
            times = kw.get("times")
            if times is None or n_all < times:
                return self._status_fault(kw)
        elif kind == "status_every_other" and not head:
            first_fails = kw.get("first_fails", True)
            if (n_get % 2 == 0) == bool(first_fails):
                return self._status_fault(kw)
        elif kind == "no_head" and head:
            return self._simple(405, b"", headers=[("Allow", "GET")])
        elif kind == "redirect":
            code = int(kw.get("code", 302))
            host, port = self.fs.host, self.fs.port
            loc = "http://%s:%d/_real/%s" % (host, port, urllib.parse.quote(name))
            if kw.get("to"):
                loc = kw["to"].rstrip("/") + "/_real/" + urllib.parse.quote(name)
            loc = kw.get("location") or loc
            return self._simple(code, b"redirected\n", headers=[("Location", loc)])
        elif kind == "drip" and kw.get("delay"):
            if self.fs._stopping.wait(float(kw["delay"])):
                return False
        elif kind == "hold" and not head:
            if not self.fs._hold(fault, self._client_gone):
                return False

        inm = self.headers.get("If-None-Match")
        if not head and inm is not None and kind != "no_etag" and inm.strip() == entry.etag:
            self.send_response(304)
            self.send_header("ETag", entry.etag)
            self.end_headers()
            return True

        data = entry.data
        length = len(data)
        rng = None
        honour_range = not head and kind != "ignore_range"
        if honour_range:
            rng = parse_range(self.headers.get("Range"), length)
            ifr = self.headers.get("If-Range")
            if rng is not None and ifr is not None:
                ifr = ifr.strip()
                if ifr.startswith('"') or ifr.startswith("W/"):
                    match = kind != "no_etag" and ifr == entry.etag
                else:
                    match = ifr == entry.last_modified
                if not match:
                    rng = None
        claimed = str(kw.get("length", HUGE)) if kind == "huge_length" else str(length)
        if rng == "unsat":
            return self._simple(416, b"", headers=[("Content-Range", "bytes */%s" % claimed)])
        if rng is not None and kind == "other_range":
            start, end = rng
            size = end - start + 1
            shift = int(kw.get("shift", 4096))
            ns = start + shift if start + shift < length else max(0, start - shift)
            rng = (ns, min(length - 1, ns + size - 1))

        if rng is None:
            code, start, end = 200, 0, length - 1
        else:
            code, (start, end) = 206, rng
        body = memoryview(data)[start:end + 1]

        no_length = kind == "no_length"
        chunked = no_length and bool(kw.get("chunked"))
        # A 200 claiming more than it sends must end by closing.
        lying_200 = kind == "huge_length" and code == 200
        self.send_response(code)
        self.send_header("Content-Type", entry.content_type)
        if lying_200:
            self.send_header("Content-Length", claimed)
            if not head:
                self.send_header("Connection", "close")
        elif not no_length:
            self.send_header("Content-Length", str(len(body)))
        elif chunked and not head:
            self.send_header("Transfer-Encoding", "chunked")
        elif not head:
            self.send_header("Connection", "close")
        if kind != "no_etag":
            self.send_header("ETag", entry.etag)
        if kind == "huge_date":
            self.send_header("Last-Modified", "Sun, 06 Nov %s 08:49:37 GMT" % kw.get("year", "99999999999999999"))
        else:
            self.send_header("Last-Modified", entry.last_modified)
        if kind != "ignore_range":
            self.send_header("Accept-Ranges", "bytes")
        if code == 206:
            if kind == "huge_range_end":
                content_range = "bytes %d-%s/*" % (start, kw.get("end", HUGE))
            elif kind == "bad_content_range":
                content_range = str(kw.get("value", "bytes garbage"))
            else:
                content_range = "bytes %d-%d/%s" % (start, end, claimed)
            self.send_header("Content-Range", content_range)
        self.end_headers()
        if head:
            return True
        if lying_200:
            self._write(body)
            self._abort()
            return False

        if kind == "drop":
            times = kw.get("times")
            if times is None or n_get < times:
                self._write(body, limit=int(kw.get("after", 0)))
                self._abort(rst=bool(kw.get("rst")))
                return False
        elif kind == "short":
            self._write(body, limit=len(body) - int(kw.get("missing", 1000)))
            self._abort()
            return False
        elif kind == "drip":
            rate = float(kw.get("bytes_per_sec", 10_000))
            chunk = int(kw.get("chunk", max(1, min(int(rate), 4096))))
            return self._write(body, rate=rate, chunk=chunk)
        if chunked:
            ok = self._write(body, chunked=True)
            if ok:
                self.connection.sendall(b"0\r\n\r\n")
            return ok
        return self._write(body)

    def _status_fault(self, kw):
        status = int(kw.get("status", 503))
        hdrs = []
        if kw.get("retry_after") is not None:
            hdrs.append(("Retry-After", str(kw["retry_after"])))
        hdrs.extend((kw.get("headers") or {}).items())
        return self._simple(status, b"fault: status %d\n" % status, headers=hdrs)


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True


class FaultServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, verbose: bool = False):
        self.host = host
        self.verbose = verbose
        self._lock = threading.Lock()
        self._files: dict[str, _Entry] = {}
        self._faults: dict[str, _Fault] = {}
        self._log: list[Request] = []
        self._conns: set = set()
        self._threads: set = set()
        self._stopping = threading.Event()
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.fs = self
        self.port = self._httpd.server_address[1]
        self._thread: threading.Thread | None = None

    # ---- lifecycle
    def start(self) -> "FaultServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.01},
                                        name="faultserver", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving, cut every open connection, join the threads."""
        self._stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout)
        self._httpd.server_close()
        with self._lock:
            conns, threads = list(self._conns), list(self._threads)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self):
        return self.start() if self._thread is None else self

    def __exit__(self, *exc):
        self.stop()

    @property
    def base_url(self) -> str:
        return "http://%s:%d/" % (self.host, self.port)

    def url(self, name: str) -> str:
        return self.base_url + urllib.parse.quote(name)

    # ---- content
    def add(self, name: str, data: bytes, content_type: str = "application/octet-stream",
            mtime: float | None = None) -> str:
        """Serve `data` as /<name> (replacing any previous content); returns the URL.
        mtime overrides the generated Last-Modified timestamp (epoch seconds)."""
        with self._lock:
            old = self._files.get(name)
            version = old.version + 1 if old else 1
            self._files[name] = _make_entry(data, content_type, version, mtime)
        return self.url(name)

    def replace(self, name: str, new_data: bytes, mtime: float | None = None,
                fault: str | None = None) -> None:
        """Change the content of an existing file: new ETag and Last-Modified.
        fault= sets that fault (no options) in the same step, so no request
        sees the new content without it or the old content with it."""
        with self._lock:
            old = self._files[name]
            self._files[name] = _make_entry(new_data, old.content_type, old.version + 1, mtime)
            if fault is not None:
                if fault not in BEHAVIOURS:
                    raise ValueError("unknown behaviour %r" % fault)
                self._faults[name] = _Fault(fault, {})

    def remove(self, name: str) -> None:
        with self._lock:
            self._files.pop(name, None)

    def data(self, name: str) -> bytes:
        with self._lock:
            return self._files[name].data

    def etag(self, name: str) -> str:
        with self._lock:
            return self._files[name].etag

    def last_modified(self, name: str) -> str:
        with self._lock:
            return self._files[name].last_modified

    # ---- faults
    def set_fault(self, name: str, behaviour: str | None, **kwargs) -> None:
        with self._lock:
            old = self._faults.get(name)
            if old is not None and old.kind == "hold":
                for event in old.held:   # a hold that goes lets its GETs go
                    event.set()
            if behaviour is None:
                self._faults.pop(name, None)
                return
            if behaviour not in BEHAVIOURS:
                raise ValueError("unknown behaviour %r (known: %s)"
                                 % (behaviour, ", ".join(sorted(BEHAVIOURS))))
            bad = set(kwargs) - BEHAVIOURS[behaviour]
            if bad:
                raise TypeError("%s: unexpected options %s" % (behaviour, sorted(bad)))
            self._faults[name] = _Fault(behaviour, dict(kwargs))

    def release(self, name: str, count: int | None = None) -> None:
        """Let held GETs of a `hold` fault go: the oldest `count` of them,
        or (count=None) all of them and every later one."""
        with self._lock:
            fault = self._faults.get(name)
            if fault is None or fault.kind != "hold":
                raise ValueError("%s: no hold fault" % name)
            if count is None:
                fault.open = True
                count = len(fault.held)
            if count > len(fault.held):
                raise ValueError("%s: %d held, asked to release %d" % (name, len(fault.held), count))
            for event in fault.held[:count]:
                event.set()
            del fault.held[:count]

    def held(self, name: str) -> int:
        """How many GETs of `name` wait on its hold fault now."""
        with self._lock:
            fault = self._faults.get(name)
            return len(fault.held) if fault is not None and fault.kind == "hold" else 0

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    # ---- request log
    @property
    def requests(self) -> list[Request]:
        """Snapshot (copies) of all requests so far, including in-flight ones."""
        with self._lock:
            return [dataclasses.replace(r, headers=dict(r.headers),
                                        response_headers=dict(r.response_headers))
                    for r in self._log]

    def clear_log(self) -> None:
        with self._lock:
            self._log.clear()

    def bytes_sent(self, name: str | None = None) -> int:
        with self._lock:
            return sum(r.bytes_sent for r in self._log if name is None or r.name == name)

    def wait_for(self, predicate, timeout: float = 5.0, interval: float = 0.01):
        """Poll predicate(self.requests) until truthy; returns its value or
        raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            v = predicate(self.requests)
            if v:
                return v
            if time.monotonic() >= deadline:
                raise TimeoutError("faultserver: condition not met in %.1fs" % timeout)
            time.sleep(interval)

    def wait_idle(self, timeout: float = 30.0) -> list[Request]:
        """Wait until every logged request is done; returns the snapshot. A
        daemon's long transfer may stay open for its reader's grace (5 s by
        default) and then its hold's bound (10 s) before it ends: returning
        as soon as all are done, the bound costs a passing test nothing."""
        self.wait_for(lambda rs: all(r.done for r in rs) or None, timeout)
        return self.requests

    # ---- internals (called from handler threads)
    def _register(self, conn):
        with self._lock:
            self._conns.add(conn)
            self._threads.add(threading.current_thread())

    def _unregister(self, conn):
        with self._lock:
            self._conns.discard(conn)
            self._threads.discard(threading.current_thread())

    def _begin(self, h: _Handler, name: str) -> Request:
        rec = Request(method=h.command, path=h.path, name=name,
                      range=h.headers.get("Range"), if_range=h.headers.get("If-Range"),
                      headers=dict(h.headers.items()), client_port=h.client_address[1],
                      started=time.monotonic())
        with self._lock:
            self._log.append(rec)
        return rec

    def _update(self, rec: Request, fn) -> None:
        with self._lock:
            fn(rec)

    def _finish(self, rec: Request, ok: bool) -> None:
        with self._lock:
            rec.completed = bool(ok)
            rec.done = True
            rec.finished = time.monotonic()

    def _hold(self, fault, client_gone) -> bool:
        """Wait until released; False when the server stops or the client left."""
        with self._lock:
            if fault.open:
                return True
            event = threading.Event()
            fault.held.append(event)
        while not event.wait(0.02):
            if self._stopping.is_set() or client_gone():
                with self._lock:
                    if event in fault.held:
                        fault.held.remove(event)
                return False
        return True

    def _lookup(self, name, head, real):
        """-> (entry, fault, n_all, n_get) with counters *before* this request."""
        with self._lock:
            fault = None if real else self._faults.get(name)
            n_all = n_get = 0
            if fault is not None:
                n_all, n_get = fault.n_all, fault.n_get
                fault.n_all += 1
                if not head:
                    fault.n_get += 1
                entry = self._files.get(name)
                if (fault.kind == "change" and not fault.changed and entry is not None
                        and n_all >= int(fault.kw.get("after", 1))):
                    new = fault.kw.get("new_data")
                    if new is None:
                        new = bytes(b ^ 0xFF for b in entry.data)
                    self._files[name] = _make_entry(new, entry.content_type, entry.version + 1)
                    fault.changed = True
            return self._files.get(name), fault, n_all, n_get


# ---------------------------------------------------------------- CLI

def _parse_fault(spec: str):
    """'name=behaviour[:k=v,k=v]' -> (name, behaviour, kwargs)."""
    name, sep, rest = spec.partition("=")
    if not sep or not rest:
        raise argparse.ArgumentTypeError("fault must be name=behaviour[:k=v,...]: %r" % spec)
    behaviour, _, opts = rest.partition(":")
    kwargs = {}
    for item in filter(None, opts.split(",")):
        k, _, v = item.partition("=")
        for conv in (int, float):
            try:
                v = conv(v)
                break
            except ValueError:
                pass
        else:
            if v.lower() in ("true", "false"):
                v = v.lower() == "true"
        kwargs[k.strip()] = v
    return name, behaviour, kwargs


def main(argv=None):
    ap = argparse.ArgumentParser(description="Fault-injecting HTTP/1.1 file server")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--dir", required=True, help="serve the files under this directory")
    ap.add_argument("--fault", action="append", default=[], type=_parse_fault,
                    metavar="NAME=BEHAVIOUR[:K=V,...]")
    ap.add_argument("-v", "--verbose", action="store_true", help="log requests to stderr")
    args = ap.parse_args(argv)

    srv = FaultServer(args.host, args.port, verbose=args.verbose)
    root = os.path.abspath(args.dir)
    for dirpath, _, files in os.walk(root):
        for f in sorted(files):
            p = os.path.join(dirpath, f)
            rel = os.path.relpath(p, root).replace(os.sep, "/")
            with open(p, "rb") as fh:
                srv.add(rel, fh.read())
    for name, behaviour, kwargs in args.fault:
        srv.set_fault(name, behaviour, **kwargs)
    srv.start()
    print(srv.base_url, flush=True)
    for name in sorted(srv._files):
        fault = srv._faults.get(name)
        print("  %s%s" % (srv.url(name), "  [%s %s]" % (fault.kind, fault.kw) if fault else ""),
              flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
