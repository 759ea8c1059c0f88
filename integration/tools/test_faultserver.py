"""Tests of the fault-injecting test server itself (no mediafs involved)."""

import http.client
import random
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from faultserver import FaultServer, parse_range, _parse_fault

DATA = random.Random(1234).randbytes(300_000)
BIG = random.Random(99).randbytes(16 * 1024 * 1024)   # larger than socket buffers


@pytest.fixture
def srv():
    s = FaultServer().start()
    s.add("a.bin", DATA)
    s.add("dir/b c.bin", b"hello world", content_type="text/plain")
    yield s
    s.stop()


def conn(srv):
    return http.client.HTTPConnection(srv.host, srv.port, timeout=5)


def get(srv, name, headers=None, method="GET"):
    c = conn(srv)
    c.request(method, "/" + name if not name.startswith("/") else name, headers=headers or {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r, body


# ------------------------------------------------------------ normal behaviour

def test_full_get_and_headers(srv):
    assert srv.url("a.bin") == "http://127.0.0.1:%d/a.bin" % srv.port
    with urllib.request.urlopen(srv.url("a.bin"), timeout=5) as r:
        body = r.read()
        assert r.status == 200
        assert r.headers["Content-Length"] == str(len(DATA))
        assert r.headers["Content-Type"] == "application/octet-stream"
        assert r.headers["Accept-Ranges"] == "bytes"
        assert r.headers["ETag"] == srv.etag("a.bin")
        assert r.headers["Last-Modified"].endswith(" GMT")
    assert body == DATA
    with urllib.request.urlopen(srv.url("dir/b c.bin"), timeout=5) as r:
        assert r.read() == b"hello world"
        assert r.headers["Content-Type"] == "text/plain"
    srv.wait_idle()
    reqs = srv.requests
    assert [(q.method, q.name, q.status, q.completed) for q in reqs] == [
        ("GET", "a.bin", 200, True), ("GET", "dir/b c.bin", 200, True)]
    assert reqs[0].bytes_sent == len(DATA) and reqs[0].range is None
    assert srv.bytes_sent() == len(DATA) + 11
    assert srv.bytes_sent("a.bin") == len(DATA)
    srv.clear_log()
    assert srv.requests == [] and srv.bytes_sent() == 0


def test_head(srv):
    r, body = get(srv, "a.bin", method="HEAD")
    assert r.status == 200 and body == b""
    assert r.headers["Content-Length"] == str(len(DATA))
    assert r.headers["Accept-Ranges"] == "bytes"
    assert r.headers["ETag"] == srv.etag("a.bin")
    assert r.headers["Last-Modified"] == srv.last_modified("a.bin")
    assert srv.wait_idle()[0].bytes_sent == 0


@pytest.mark.parametrize("spec,start,end", [
    ("bytes=0-0", 0, 0),
    ("bytes=100-199", 100, 199),
    ("bytes=299990-", 299990, 299999),
    ("bytes=299990-400000", 299990, 299999),
    ("bytes=-10", 299990, 299999),
    ("bytes=-999999", 0, 299999),
])
def test_ranges(srv, spec, start, end):
    r, body = get(srv, "a.bin", {"Range": spec})
    assert r.status == 206
    assert r.headers["Content-Range"] == "bytes %d-%d/%d" % (start, end, len(DATA))
    assert r.headers["Content-Length"] == str(end - start + 1)
    assert body == DATA[start:end + 1]
    q = srv.wait_idle()[-1]
    assert q.range == spec and q.status == 206 and q.bytes_sent == end - start + 1


@pytest.mark.parametrize("spec", ["bytes=300000-", "bytes=400000-400010", "bytes=-0"])
def test_unsatisfiable(srv, spec):
    r, body = get(srv, "a.bin", {"Range": spec})
    assert r.status == 416
    assert r.headers["Content-Range"] == "bytes */%d" % len(DATA)


@pytest.mark.parametrize("spec", ["bytes=0-1,5-6", "items=0-5", "bytes=9-3", "bytes=x-"])
def test_ignored_ranges(srv, spec):
    r, body = get(srv, "a.bin", {"Range": spec})
    assert r.status == 200 and body == DATA


def test_parse_range_empty_file():
    assert parse_range("bytes=0-", 0) == "unsat"
    assert parse_range("bytes=-5", 0) == "unsat"
    assert parse_range(None, 0) is None


def test_if_range(srv):
    etag, lm = srv.etag("a.bin"), srv.last_modified("a.bin")
    r, body = get(srv, "a.bin", {"Range": "bytes=10-19", "If-Range": etag})
    assert r.status == 206 and body == DATA[10:20]
    r, body = get(srv, "a.bin", {"Range": "bytes=10-19", "If-Range": lm})
    assert r.status == 206 and body == DATA[10:20]
    r, body = get(srv, "a.bin", {"Range": "bytes=10-19", "If-Range": '"nope"'})
    assert r.status == 200 and body == DATA
    r, body = get(srv, "a.bin", {"Range": "bytes=10-19", "If-Range": "W/" + etag})
    assert r.status == 200
    assert srv.wait_idle()[0].if_range == etag


def test_404(srv):
    r, _ = get(srv, "nope.bin")
    assert r.status == 404
    r, _ = get(srv, "nope.bin", method="HEAD")
    assert r.status == 404


def test_keep_alive(srv):
    c = conn(srv)
    for i in range(3):
        c.request("GET", "/a.bin", headers={"Range": "bytes=%d-%d" % (i, i + 9)})
        r = c.getresponse()
        assert r.read() == DATA[i:i + 10]
    c.close()
    reqs = srv.wait_idle()
    assert len(reqs) == 3 and len({q.client_port for q in reqs}) == 1


def test_client_cancel_recorded(srv):
    srv.add("big.bin", BIG)
    s = socket.create_connection((srv.host, srv.port))
    s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    s.recv(1000)
    s.close()
    q = srv.wait_for(lambda rs: rs and rs[0].done and rs[0])
    assert q.completed is False and 0 < q.bytes_sent < len(BIG)


def test_replace(srv):
    old = srv.etag("a.bin"), srv.last_modified("a.bin")
    srv.replace("a.bin", b"new")
    r, body = get(srv, "a.bin")
    assert body == b"new"
    assert (r.headers["ETag"], r.headers["Last-Modified"]) != old
    assert r.headers["ETag"] == srv.etag("a.bin")


def test_bad_fault_args(srv):
    with pytest.raises(ValueError):
        srv.set_fault("a.bin", "explode")
    with pytest.raises(TypeError):
        srv.set_fault("a.bin", "drop", aftr=3)


# ------------------------------------------------------------ faults

def test_drop(srv):
    srv.set_fault("a.bin", "drop", after=1000, times=1)
    with pytest.raises(http.client.IncompleteRead) as ei:
        get(srv, "a.bin")
    assert len(ei.value.partial) == 1000
    r, body = get(srv, "a.bin")          # times=1: second request is normal
    assert body == DATA
    reqs = srv.wait_idle()
    assert [(q.bytes_sent, q.completed) for q in reqs] == [(1000, False), (len(DATA), True)]


def test_drop_ranged_all(srv):
    srv.set_fault("a.bin", "drop", after=10)
    for _ in range(2):
        with pytest.raises(http.client.IncompleteRead) as ei:
            get(srv, "a.bin", {"Range": "bytes=100-"})
        assert ei.value.partial == DATA[100:110]


def test_drop_rst(srv):
    srv.set_fault("a.bin", "drop", after=0, rst=True)
    with pytest.raises((http.client.IncompleteRead, ConnectionError)):
        get(srv, "a.bin")
    assert srv.wait_idle()[0].completed is False


def test_status_every_other(srv):
    srv.set_fault("a.bin", "status_every_other", status=503, retry_after=2)
    got = []
    for _ in range(4):
        r, body = get(srv, "a.bin")
        got.append(r.status)
        if r.status == 503:
            assert r.headers["Retry-After"] == "2"
        else:
            assert body == DATA
    assert got == [503, 200, 503, 200]
    r, _ = get(srv, "a.bin", method="HEAD")
    assert r.status == 200


@pytest.mark.parametrize("status", [404, 410, 401, 403, 500])
def test_status(srv, status):
    srv.set_fault("a.bin", "status", status=status)
    for method in ("GET", "HEAD", "GET"):
        r, _ = get(srv, "a.bin", method=method)
        assert r.status == status


def test_status_times_and_retry_after(srv):
    srv.set_fault("a.bin", "status", status=429, retry_after=1, times=2)
    r1, _ = get(srv, "a.bin")
    r2, _ = get(srv, "a.bin")
    r3, body = get(srv, "a.bin")
    assert (r1.status, r2.status, r3.status) == (429, 429, 200)
    assert r1.headers["Retry-After"] == "1" and body == DATA
    srv.set_fault("a.bin", None)
    assert get(srv, "a.bin")[0].status == 200


def test_drip(srv):
    srv.add("s.bin", b"x" * 400)
    srv.set_fault("s.bin", "drip", bytes_per_sec=2000, chunk=100)
    t0 = time.monotonic()
    r, body = get(srv, "s.bin")
    took = time.monotonic() - t0
    assert body == b"x" * 400 and r.status == 200
    assert 0.12 <= took < 2.0            # 3 sleeps of 0.05 s between 4 chunks


def test_drip_stops_when_client_goes(srv):
    srv.set_fault("a.bin", "drip", bytes_per_sec=1000, chunk=100)
    s = socket.create_connection((srv.host, srv.port))
    s.sendall(b"GET /a.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.3)
    s.close()
    q = srv.wait_for(lambda rs: rs and rs[0].done and rs[0], timeout=2)
    assert q.completed is False and q.bytes_sent < 1000


def test_stop_is_prompt_during_drip():
    s = FaultServer().start()
    s.add("a.bin", DATA)
    s.set_fault("a.bin", "drip", bytes_per_sec=100, chunk=10)
    c = socket.create_connection((s.host, s.port))
    c.sendall(b"GET /a.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    s.wait_for(lambda rs: rs and rs[0].bytes_sent > 0)
    idle = socket.create_connection((s.host, s.port))   # kept-alive idle connection
    t0 = time.monotonic()
    s.stop()
    assert time.monotonic() - t0 < 1.0
    q = s.requests[0]
    assert q.done and not q.completed
    c.close()
    idle.close()
    with pytest.raises(OSError):
        socket.create_connection((s.host, s.port), timeout=1)


def test_ignore_range(srv):
    srv.set_fault("a.bin", "ignore_range")
    r, body = get(srv, "a.bin", {"Range": "bytes=100-199"})
    assert r.status == 200 and body == DATA
    assert "Accept-Ranges" not in r.headers and "Content-Range" not in r.headers
    r, _ = get(srv, "a.bin", method="HEAD")
    assert r.status == 200 and "Accept-Ranges" not in r.headers


def test_other_range(srv):
    srv.set_fault("a.bin", "other_range")
    r, body = get(srv, "a.bin", {"Range": "bytes=100-199"})
    assert r.status == 206
    assert r.headers["Content-Range"] == "bytes 4196-4295/%d" % len(DATA)
    assert body == DATA[4196:4296]
    srv.set_fault("a.bin", "other_range", shift=50)
    r, body = get(srv, "a.bin", {"Range": "bytes=299980-"})   # would pass the end
    assert r.headers["Content-Range"] == "bytes 299930-299949/%d" % len(DATA)
    assert body == DATA[299930:299950]
    r, body = get(srv, "a.bin")                                # no Range: normal
    assert r.status == 200 and body == DATA


@pytest.mark.parametrize("code", [301, 302, 307])
def test_redirect(srv, code):
    srv.set_fault("a.bin", "redirect", code=code)
    r, _ = get(srv, "a.bin")
    assert r.status == code
    assert r.headers["Location"] == srv.base_url + "_real/a.bin"
    req = urllib.request.Request(srv.url("a.bin"), headers={"Range": "bytes=5-9"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 206 and resp.read() == DATA[5:10]
    r, _ = get(srv, "a.bin", method="HEAD")
    assert r.status == code
    reqs = srv.wait_idle()
    assert [q.path for q in reqs[1:3]] == ["/a.bin", "/_real/a.bin"]
    assert reqs[2].name == "a.bin"


def test_redirect_quoted_name(srv):
    srv.set_fault("dir/b c.bin", "redirect")
    with urllib.request.urlopen(srv.url("dir/b c.bin"), timeout=5) as resp:
        assert resp.read() == b"hello world"


def test_change(srv):
    srv.set_fault("a.bin", "change", after=2)
    r1, b1 = get(srv, "a.bin", method="HEAD")
    r2, b2 = get(srv, "a.bin", {"Range": "bytes=0-9"})
    r3, b3 = get(srv, "a.bin", {"Range": "bytes=0-9"})
    r4, b4 = get(srv, "a.bin", {"Range": "bytes=0-9", "If-Range": r1.headers["ETag"]})
    assert r1.headers["ETag"] == r2.headers["ETag"] != r3.headers["ETag"]
    assert r2.headers["Last-Modified"] != r3.headers["Last-Modified"]
    assert b2 == DATA[:10] and b3 == bytes(b ^ 0xFF for b in DATA[:10])
    assert r4.status == 200 and len(b4) == len(DATA) and b4 != DATA   # If-Range mismatch
    assert r3.headers["ETag"] == srv.etag("a.bin")


def test_change_new_data(srv):
    srv.set_fault("a.bin", "change", new_data=b"v2!")
    _, b1 = get(srv, "a.bin")
    _, b2 = get(srv, "a.bin")
    _, b3 = get(srv, "a.bin")
    assert (b1, b2, b3) == (DATA, b"v2!", b"v2!")


def test_short(srv):
    srv.set_fault("a.bin", "short")
    with pytest.raises(http.client.IncompleteRead) as ei:
        get(srv, "a.bin")
    assert ei.value.partial == DATA[:-1000]
    srv.set_fault("a.bin", "short", missing=5)
    with pytest.raises(http.client.IncompleteRead) as ei:
        get(srv, "a.bin", {"Range": "bytes=0-99"})
    assert ei.value.partial == DATA[:95]
    reqs = srv.wait_idle()
    assert [(q.bytes_sent, q.completed) for q in reqs] == [
        (len(DATA) - 1000, False), (95, False)]


def test_no_head(srv):
    srv.set_fault("a.bin", "no_head")
    r, _ = get(srv, "a.bin", method="HEAD")
    assert r.status == 405
    r, body = get(srv, "a.bin", {"Range": "bytes=0-0"})
    assert r.status == 206 and body == DATA[:1]
    assert r.headers["Content-Range"] == "bytes 0-0/%d" % len(DATA)


@pytest.mark.parametrize("chunked", [False, True])
def test_no_length(srv, chunked):
    srv.set_fault("a.bin", "no_length", chunked=chunked)
    r, body = get(srv, "a.bin")
    assert r.status == 200 and body == DATA
    assert "Content-Length" not in r.headers
    assert (r.headers.get("Transfer-Encoding") == "chunked") == chunked
    r, body = get(srv, "a.bin", {"Range": "bytes=10-19"})
    assert r.status == 206 and body == DATA[10:20]
    r, _ = get(srv, "a.bin", method="HEAD")
    assert "Content-Length" not in r.headers


# ------------------------------------------------------------ CLI

def test_parse_fault_spec():
    assert _parse_fault("a.bin=drop:after=10,times=2,rst=true") == (
        "a.bin", "drop", {"after": 10, "times": 2, "rst": True})
    assert _parse_fault("x=drip:bytes_per_sec=2.5") == ("x", "drip", {"bytes_per_sec": 2.5})
    assert _parse_fault("x=ignore_range") == ("x", "ignore_range", {})


def test_cli(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.bin").write_bytes(b"0123456789")
    p = subprocess.Popen([sys.executable, str(Path(__file__).resolve().parents[1] / "faultserver.py"),
                          "--dir", str(tmp_path), "--fault", "sub/f.bin=other_range:shift=2"],
                         stdout=subprocess.PIPE, text=True)
    try:
        base = p.stdout.readline().strip()
        assert base.startswith("http://127.0.0.1:")
        req = urllib.request.Request(base + "sub/f.bin", headers={"Range": "bytes=0-3"})
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.read() == b"2345"
    finally:
        p.terminate()
        p.wait(5)
