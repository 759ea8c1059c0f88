"""How requests reach the server: through `--proxy` or the proxy the
environment names (--proxy wins), with the proxy's password for the proxy
alone; and https from a private CA, trusted with `--cacert` and refused
without it; and an https origin that speaks HTTP/2, whose requests go as
streams of one connection, many at once.

The proxy is integration/forwardproxy.py (plain HTTP, absolute-form, no CONNECT),
which marks what it forwards, so the FaultServer behind it tells proxied
requests from direct ones. The https server is nginx with a certificate
made by `openssl req` for 127.0.0.1.
"""

import base64
import errno
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from forwardproxy import MARK, MARK_HEADER, ForwardProxy
from harness import data_of, read_whole

MiB = 1024 * 1024
MOUNT_ARGS = ("--timeout", "10", "--retries", "1")
SECRET = "pr0xy-Pa55"
PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                   "no_proxy", "NO_PROXY")


@pytest.fixture
def proxy():
    p = ForwardProxy().start()
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture
def clean_env(monkeypatch):
    """No proxy variable from the test's environment reaches a mount."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def assert_all_proxied(srv, name):
    got = [r for r in srv.requests if r.name == name]
    assert got, f"the server saw no request for {name}"
    direct = [(r.method, r.range) for r in got if r.headers.get(MARK_HEADER) != MARK]
    assert not direct, f"requests that bypassed the proxy: {direct}"


def test_a_mount_with_proxy_sends_every_request_through_it_and_reads_right(mount, srv, proxy, clean_env):
    data = data_of(3 * MiB, 1)
    srv.add("p.bin", data)
    m = mount(srv.url("p.bin"), extra=(*MOUNT_ARGS, "--proxy", proxy.url))
    assert read_whole(m.path("p.bin")) == data
    assert_all_proxied(srv, "p.bin")
    seen = [r for r in proxy.requests if r.url == srv.url("p.bin")]
    assert any(r.method == "GET" for r in seen), proxy.requests


def test_a_remote_playlist_is_fetched_through_the_proxy_too(mount, srv, proxy, clean_env):
    data = data_of(200_000, 2)
    srv.add("song.bin", data)
    srv.add("list.m3u", f"#EXTM3U\n#EXTINF:1,Song\n{srv.url('song.bin')}\n".encode())
    m = mount(srv.url("list.m3u"), extra=(*MOUNT_ARGS, "-o", f"proxy={proxy.url}"))
    assert read_whole(m.path("Song.bin")) == data
    assert_all_proxied(srv, "list.m3u")
    assert_all_proxied(srv, "song.bin")


def test_http_proxy_from_the_environment_is_used_when_no_proxy_option_is_given(mount, srv, proxy, clean_env):
    data = data_of(2 * MiB, 3)
    srv.add("e.bin", data)
    clean_env.setenv("http_proxy", proxy.url)
    m = mount(srv.url("e.bin"), extra=MOUNT_ARGS)
    assert read_whole(m.path("e.bin")) == data
    assert_all_proxied(srv, "e.bin")


def test_no_proxy_from_the_environment_sends_that_host_direct(mount, srv, proxy, clean_env):
    data = data_of(1 * MiB, 4)
    srv.add("n.bin", data)
    clean_env.setenv("http_proxy", proxy.url)
    clean_env.setenv("no_proxy", "127.0.0.1")
    m = mount(srv.url("n.bin"), extra=MOUNT_ARGS)
    assert read_whole(m.path("n.bin")) == data
    assert proxy.requests == []
    assert all(MARK_HEADER not in r.headers for r in srv.requests)


def test_the_proxy_option_wins_over_the_environment(mount, srv, proxy, clean_env):
    data = data_of(1 * MiB, 5)
    srv.add("w.bin", data)
    clean_env.setenv("http_proxy", f"http://127.0.0.1:{harness.free_port()}")  # nothing listens there
    m = mount(srv.url("w.bin"), extra=(*MOUNT_ARGS, "--proxy", proxy.url))
    assert read_whole(m.path("w.bin")) == data
    assert_all_proxied(srv, "w.bin")


def test_the_proxy_password_goes_to_the_proxy_only_and_is_never_logged(mount, srv, proxy, clean_env):
    data = data_of(1 * MiB, 6)
    srv.add("c.bin", data)
    proxy_url = f"http://alice:{SECRET}@127.0.0.1:{proxy.port}"
    m = mount(srv.url("c.bin"), extra=(*MOUNT_ARGS, "-d", "--proxy", proxy_url))
    assert read_whole(m.path("c.bin")) == data
    expected = "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()
    assert proxy.requests and all(r.headers.get("Proxy-Authorization") == expected for r in proxy.requests)
    assert_all_proxied(srv, "c.bin")
    for r in srv.requests:
        assert "Proxy-Authorization" not in r.headers
        assert not any(SECRET in v or expected in v for v in r.headers.values())
    assert SECRET not in m.stderr()


def test_a_bad_proxy_is_refused_before_mounting_without_showing_its_password(tmp_path, srv):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    srv.add("x.bin", b"x")
    for bad in ("proxy.example:3128", f"ftp://bob:{SECRET}@127.0.0.1:21", "http://127.0.0.1:99999"):
        r = harness.mediafs("mount", "--cache-dir", tmp_path / "cache", "--proxy", bad, srv.url("x.bin"), mnt)
        assert r.returncode == 2, r.stderr
        assert "--proxy" in r.stderr and SECRET not in r.stderr
        assert not harness.is_mounted(mnt)


# ---------------------------------------------------------------- TLS

class TLSNginx:
    """nginx serving `root` over https on 127.0.0.1 with a self-signed
    certificate for that address, stopped by pid; with `http2`, HTTP/2 by
    ALPN and an access log (`log()`)."""

    def __init__(self, workdir, root, http2=False):
        self.workdir = workdir
        self.access_log = workdir / "access.log"
        self.port = harness.free_port()
        self.cert = workdir / "ca.pem"
        key = workdir / "key.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-keyout", str(key), "-out", str(self.cert), "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        (workdir / "temp").mkdir()
        user = "user root;" if os.geteuid() == 0 else ""
        self.conf = workdir / "nginx.conf"
        self.conf.write_text(f"""\
{user}
daemon off;
master_process off;
worker_processes 1;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log info;
events {{ worker_connections 64; }}
http {{
    log_format timed "$msec $request_method $uri $connection $server_protocol";
    access_log {self.access_log if http2 else "off"}{" timed" if http2 else ""};
    client_body_temp_path {workdir}/temp/body;
    proxy_temp_path {workdir}/temp/proxy;
    server {{
        listen 127.0.0.1:{self.port} ssl{" http2" if http2 else ""};
        ssl_certificate {self.cert};
        ssl_certificate_key {key};
        root {root};
    }}
}}
""")
        self.proc = subprocess.Popen(["nginx", "-p", str(workdir), "-e", str(workdir / "error.log"),
                                      "-c", str(self.conf)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def url(self, name):
        return f"https://127.0.0.1:{self.port}/{name}"

    def log(self):
        """(seconds, method, uri, connection, protocol) of each request logged."""
        if not self.access_log.exists():
            return []
        out = []
        for line in self.access_log.read_text().splitlines():
            msec, method, uri, conn, proto = line.split()
            out.append((float(msec), method, uri, int(conn), proto))
        return out

    def stop(self):
        harness.stop_popen(self.proc, timeout=0)


def _tls_server(tmp_path, http2):
    root = tmp_path / "tls-root"
    root.mkdir()
    workdir = tmp_path / "tls-nginx"
    workdir.mkdir()
    server = TLSNginx(workdir, root, http2=http2)
    try:
        harness.wait_until(lambda: _listening(server.port), "the https nginx to listen", timeout=10)
        yield server, root
    finally:
        server.stop()


@pytest.fixture
def tls(tmp_path):
    yield from _tls_server(tmp_path, http2=False)


@pytest.fixture
def tls_h2(tmp_path):
    yield from _tls_server(tmp_path, http2=True)


LINKEM = Path(__file__).resolve().parent.parent / "bench" / "linkem.py"


@pytest.fixture
def delayed():
    """delayed(port, delay_ms) -> the port of bench/linkem.py in front of
    127.0.0.1:port, adding delay_ms each way; stopped by pid."""
    started = []

    def start(upstream_port, delay_ms):
        proc = subprocess.Popen([sys.executable, str(LINKEM), "--upstream", f"127.0.0.1:{upstream_port}",
                                 "--delay-ms", str(delay_ms), "--lifetime", "300", "--stdin-watch"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        started.append(proc)
        line = proc.stdout.readline()
        assert line.strip().isdigit(), f"linkem printed {line!r}, rc={proc.poll()}"
        return int(line)
    yield start
    for proc in started:
        proc.terminate()
        harness.stop_popen(proc, timeout=5)


def _listening(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_https_from_a_private_ca_is_refused_without_cacert_and_reads_right_with_it(mount, tls, clean_env):
    server, root = tls
    data = data_of(3 * MiB, 7)
    (root / "t.bin").write_bytes(data)
    untrusting = mount(server.url("t.bin"), extra=MOUNT_ARGS)
    failure = harness.guarded(lambda: os.stat(untrusting.path("t.bin")))
    assert isinstance(failure, OSError), f"stat through an untrusted certificate gave {failure}"
    assert failure.errno == errno.EIO
    assert harness.wait_for_stderr(untrusting, "certificate"), untrusting.stderr()

    trusting = mount(server.url("t.bin"), extra=(*MOUNT_ARGS, "--cacert", server.cert))
    assert read_whole(trusting.path("t.bin")) == data


def test_a_relative_cacert_given_as_a_mount_option_still_works_once_the_daemon_left_its_directory(
        fuse, tmp_path, tls, clean_env, monkeypatch):
    server, root = tls
    data = data_of(1 * MiB, 8)
    (root / "r.bin").write_bytes(data)
    mnt = tmp_path / "detached"
    mnt.mkdir()
    monkeypatch.chdir(server.cert.parent)
    # Without -f: the daemon changes to / when it detaches.
    r = harness.mediafs("mount", "--cache-dir", tmp_path / "cache", *MOUNT_ARGS, "-o", f"cacert={server.cert.name}",
                        server.url("r.bin"), mnt)
    try:
        assert r.returncode == 0, r.stderr
        assert harness.guarded(lambda: read_whole(mnt / "r.bin")) == data
    finally:
        pids = harness.mediafs_pids(with_arg=str(mnt))
        harness.fusermount_unmount(mnt)
        for pid in pids:
            harness.stop_pid(pid)
    assert not harness.is_mounted(mnt)


def test_a_missing_or_unusable_cacert_is_refused_before_mounting(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    for path, why in ((tmp_path / "missing.pem", "No such file"), (not_pem, "no PEM certificate"),
                      (tmp_path, "not a regular file")):
        r = harness.mediafs("mount", "--cache-dir", tmp_path / "cache", "--cacert", path,
                            "https://127.0.0.1:1/x.bin", mnt)
        assert r.returncode != 0
        assert f"--cacert {path}" in r.stderr and why in r.stderr, r.stderr
        assert not harness.is_mounted(mnt)


def rounds(times, gap):
    """Arrival times grouped into rounds: a new round after a pause of more than `gap` s."""
    out = []
    for t in sorted(times):
        if out and t - out[-1][-1] <= gap:
            out[-1].append(t)
        else:
            out.append([t])
    return out


def test_an_http2_origin_takes_a_vods_length_probes_as_streams_of_one_connection(mount, tls_h2, delayed,
                                                                                  clean_env):
    """A VOD's 40 segment lengths from an origin that answers over HTTP/2
    (nginx, ALPN) go at once, as streams of one connection: the mount's
    fetch of the playlist learned the protocol. Over HTTP/1 they went 8
    connections at a time, 5 rounds at this link's 300 ms round trip; here
    one round."""
    server, root = tls_h2
    sizes = [20_000 + 37 * i for i in range(40)]
    lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:2", "#EXT-X-PLAYLIST-TYPE:VOD"]
    whole = b""
    for i, size in enumerate(sizes):
        part = data_of(size, 300 + i)
        (root / f"seg{i:02d}.ts").write_bytes(part)
        whole += part
        lines += ["#EXTINF:2.0,", f"seg{i:02d}.ts"]
    (root / "vod.m3u8").write_text("\n".join(lines + ["#EXT-X-ENDLIST", ""]))
    port = delayed(server.port, 150)
    m = mount(f"https://127.0.0.1:{port}/vod.m3u8", extra=(*MOUNT_ARGS, "--timeout", "30", "--cacert", server.cert))
    assert os.stat(m.path("vod.ts")).st_size == len(whole)
    heads = [r for r in server.log() if r[1] == "HEAD"]
    assert sorted(r[2] for r in heads) == [f"/seg{i:02d}.ts" for i in range(40)], heads
    assert {r[4] for r in server.log()} == {"HTTP/2.0"}, server.log()
    waves = rounds([r[0] for r in heads], gap=0.15)
    assert len(waves) == 1, f"the lengths came in {len(waves)} rounds of {[len(w) for w in waves]}"
    assert len({r[3] for r in heads}) == 1, f"the lengths used connections {sorted({r[3] for r in heads})}"
    assert read_whole(m.path("vod.ts")) == whole
    assert {r[4] for r in server.log()} == {"HTTP/2.0"}


def test_an_http2_origin_gets_heads_for_the_lengths_even_from_a_reader_that_reads_next(mount, tls_h2, delayed,
                                                                                     clean_env):
    """Decision 0062: ffprobe's lookup of a cold VOD asks its segments'
    heads with their lengths only over HTTP/1. An HTTP/2 origin answers
    every HEAD in one round trip, and the heads would only put their bytes
    before the reads': the lengths are HEADs, and the first segment's
    head waits for the read."""
    server, root = tls_h2
    lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:2", "#EXT-X-PLAYLIST-TYPE:VOD"]
    for i in range(8):
        (root / f"seg{i:02d}.ts").write_bytes(data_of(50_000 + i, 500 + i))
        lines += ["#EXTINF:2.0,", f"seg{i:02d}.ts"]
    (root / "vod.m3u8").write_text("\n".join(lines + ["#EXT-X-ENDLIST", ""]))
    port = delayed(server.port, 20)
    m = mount(f"https://127.0.0.1:{port}/vod.m3u8", extra=(*MOUNT_ARGS, "--timeout", "30", "--cacert", server.cert))
    # Not media: ffprobe fails, after its lookup and reads.
    subprocess.run(["ffprobe", "-v", "quiet", str(m.path("vod.ts"))], timeout=60, check=False)
    log = server.log()
    heads = sorted(r[2] for r in log if r[1] == "HEAD")
    assert heads == [f"/seg{i:02d}.ts" for i in range(8)], log
    assert {r[4] for r in log} == {"HTTP/2.0"}, log
