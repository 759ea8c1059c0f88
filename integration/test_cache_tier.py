"""A fleet behind one HTTP cache tier: the nginx slice + proxy_cache block of
docs/deploy.md, run as written (origin, port and cache directory
substituted) between mounts and an origin nginx on loopback.

Both nginx log each request's Range and If-Range, so a test sees what the
origin sent and which conditional headers reached it.
"""

import errno
import os
import re
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

import harness
from harness import data_of, read_range, read_whole

MiB = 1024 * 1024
SIZE = 32 * MiB
MOUNT_ARGS = ("--timeout", "20")
DEPLOY_DOC = Path(__file__).resolve().parent.parent / "docs" / "deploy.md"
LOG_FIELDS = "$request_method\\t$uri\\t$http_range\\t$http_if_range\\t$status\\t$body_bytes_sent\\t$sent_http_etag"


@dataclass(frozen=True)
class Logged:
    method: str
    uri: str
    range: str
    if_range: str
    status: int
    sent: int
    etag: str


class ConfNginx:
    """nginx in the foreground with the given http-block text, logging
    LOG_FIELDS; stopped by pid."""

    def __init__(self, workdir, http_block):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "temp").mkdir(exist_ok=True)
        self.log_path = self.workdir / "access.log"
        user = "user root;" if os.geteuid() == 0 else ""
        temp = self.workdir / "temp"
        (self.workdir / "nginx.conf").write_text(f"""\
{user}
daemon off;
master_process off;
worker_processes 1;
pid {self.workdir}/nginx.pid;
error_log {self.workdir}/error.log info;
events {{ worker_connections 512; }}
http {{
    default_type application/octet-stream;
    log_format fields escape=none "{LOG_FIELDS}";
    access_log {self.log_path} fields;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
{http_block}
}}
""")
        self.proc = None

    def start(self, port):
        self.proc = subprocess.Popen(
            ["nginx", "-p", str(self.workdir), "-e", str(self.workdir / "error.log"),
             "-c", str(self.workdir / "nginx.conf")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        def listening():
            if self.proc.poll() is not None:
                pytest.fail(f"nginx exited: {self.proc.stderr.read().decode()}"
                            f"{(self.workdir / 'error.log').read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False

        harness.wait_until(listening, f"nginx on port {port}", timeout=10)

    def stop(self):
        if self.proc is not None:
            proc, self.proc = self.proc, None
            harness.stop_popen(proc, timeout=0)
            proc.stderr.close()

    def log(self):
        if not self.log_path.exists():
            return []
        entries = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            method, uri, rng, if_range, status, sent, etag = line.split("\t")
            entries.append(Logged(method, uri, "" if rng == "-" else rng, "" if if_range == "-" else if_range,
                                  int(status), int(sent), etag))
        return entries

    def clear_log(self):
        if self.log_path.exists():
            os.truncate(self.log_path, 0)

    def wait_quiet(self, quiet=1.0, timeout=30.0):
        """Until the log stops growing (an aborted response is logged late)."""
        last, since = None, time.monotonic()
        deadline = since + timeout
        while time.monotonic() < deadline:
            size = self.log_path.stat().st_size if self.log_path.exists() else 0
            if size != last:
                last, since = size, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return
            time.sleep(0.1)


def tier_block_from_the_doc(origin_port, port, cache_dir):
    """The nginx block of docs/deploy.md, pointed at this test's origin."""
    text = DEPLOY_DOC.read_text()
    blocks = re.findall(r"```nginx\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/deploy.md should hold exactly one nginx block"
    block = blocks[0]
    for old, new in (("origin.example:80", f"127.0.0.1:{origin_port}"), ("origin.example", "127.0.0.1"),
                     ("listen 8080;", f"listen 127.0.0.1:{port};"), ("/var/cache/nginx/media", str(cache_dir))):
        assert old in block, f"the doc's nginx block no longer has '{old}'"
        block = block.replace(old, new)
    return block


@dataclass
class Tier:
    origin: ConfNginx
    tier: ConfNginx
    origin_port: int
    port: int
    root: Path
    workdir: Path
    restarts: int = 0

    def url(self, name):
        return f"http://127.0.0.1:{self.port}/{name}"

    def restart_tier_empty(self):
        """The tier as if its slices had all expired: a new nginx, a new cache."""
        self.tier.stop()
        self.restarts += 1
        cache = self.workdir / f"tier-cache{self.restarts}"
        self.tier = ConfNginx(self.workdir / f"tier{self.restarts}",
                              tier_block_from_the_doc(self.origin_port, self.port, cache))
        self.tier.start(self.port)


@pytest.fixture
def tier(tmp_path):
    root = tmp_path / "origin-root"
    root.mkdir()
    origin_port, port = harness.free_port(), harness.free_port()
    origin = ConfNginx(tmp_path / "origin", f"""\
    sendfile on;
    server {{
        listen 127.0.0.1:{origin_port};
        root {root};
    }}
""")
    front = ConfNginx(tmp_path / "tier", tier_block_from_the_doc(origin_port, port, tmp_path / "tier-cache"))
    t = Tier(origin, front, origin_port, port, root, tmp_path)
    try:
        origin.start(origin_port)
        front.start(port)
        yield t
    finally:
        t.tier.stop()
        origin.stop()


def origin_etag(t, name):
    with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{t.origin_port}/{name}",
                                                       method="HEAD"), timeout=10) as r:
        return r.headers["ETag"]


def write_file(t, name, data, mtime):
    path = t.root / name
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))


def test_two_mounts_reading_one_file_through_the_tier_make_the_origin_send_it_once(mount, tier):
    data = data_of(SIZE, 11)
    write_file(tier, "film.bin", data, 1_600_000_000)
    first = mount(tier.url("film.bin"), extra=MOUNT_ARGS)
    second = mount(tier.url("film.bin"), extra=MOUNT_ARGS)
    readers = [harness.in_thread(lambda m=m: read_whole(m.path("film.bin")), 120) for m in (first, second)]
    assert [r() == data for r in readers] == [True, True]
    tier.origin.wait_quiet()
    sent = sum(e.sent for e in tier.origin.log() if e.uri == "/film.bin")
    assert SIZE <= sent <= 1.05 * SIZE, f"the origin sent {sent / SIZE:.3f}x the file"
    assert all(e.range for e in tier.origin.log()), "the tier asked the origin for something else than slices"


def test_if_range_is_answered_by_the_tier_from_its_slices_and_never_reaches_the_origin(mount, tier):
    data = data_of(SIZE, 12)
    write_file(tier, "same.bin", data, 1_600_000_000)
    etag = origin_etag(tier, "same.bin")
    tier.origin.clear_log()
    warm = mount(tier.url("same.bin"), extra=MOUNT_ARGS)
    assert read_whole(warm.path("same.bin")) == data
    tier.origin.wait_quiet()
    tier.origin.clear_log()
    tier.tier.clear_log()

    second = mount(tier.url("same.bin"), extra=MOUNT_ARGS)
    assert read_range(second.path("same.bin"), 20 * MiB, 3 * MiB) == data[20 * MiB:23 * MiB]
    tier.tier.wait_quiet()
    # The lookup's probe (a GET of the first 512 KiB) knows no validator yet.
    ranged = [e for e in tier.tier.log() if e.method == "GET" and e.range and e.range != "bytes=0-524287"]
    assert ranged, tier.tier.log()
    assert all(e.if_range == etag and e.status == 206 and e.etag == etag for e in ranged), ranged
    assert tier.origin.log() == [], "the tier held every slice, yet asked the origin"


def test_a_file_changed_at_the_origin_is_never_mixed_and_is_seen_once_the_tier_lets_go_of_the_old(mount, tier):
    old = data_of(SIZE, 13)
    new = data_of(SIZE, 14)
    write_file(tier, "moving.bin", old, 1_600_000_000)
    old_etag = origin_etag(tier, "moving.bin")
    m = mount(tier.url("moving.bin"), extra=(*MOUNT_ARGS, "--retries", "1", "--revalidate", "never"))
    path = m.path("moving.bin")
    # A small read of the head once it is cached, so the mount streams
    # nothing ahead: its cache holds the lookup's head and nothing near
    # 8 MiB (a 4 MiB read's long transfer once ran past 9 MiB before the
    # change, and the read below was then answered, rightly, from the
    # mount's own old bytes; a read while the head still arrived started
    # a player's stream when that was not kept to far links: decision 0056,
    # stress run of Dec 7).
    assert os.stat(path).st_size == SIZE
    harness.wait_transfers_ended(m)
    assert read_range(path, 0, 64 * 1024) == old[:64 * 1024]
    # Another client of the tier had the old file's slice at 8 MiB.
    warm = urllib.request.Request(tier.url("moving.bin"), headers={"Range": f"bytes={8 * MiB}-{9 * MiB - 1}"})
    with urllib.request.urlopen(warm, timeout=20) as r:
        assert r.status == 206 and r.read() == old[8 * MiB:9 * MiB]
    assert all(int(e.range.split("=")[1].split("-")[1] or SIZE) < 8 * MiB for e in tier.tier.log()
               if e.range and e.range != f"bytes={8 * MiB}-{9 * MiB - 1}"), tier.tier.log()

    write_file(tier, "moving.bin", new, 1_700_000_000)
    new_etag = origin_etag(tier, "moving.bin")
    assert new_etag != old_etag
    # The tier holds the old file's slice at 8 MiB and fetches the new
    # file's at 9 MiB: nginx's slice module refuses to stitch the two and
    # cuts the response, so the read fails rather than mix versions.
    got = harness.guarded(lambda: read_range(path, 8 * MiB + MiB // 2, 1 * MiB))
    assert isinstance(got, OSError) and got.errno == errno.EIO, "a read stitched from two versions"
    assert "etag mismatch in slice response" in (tier.tier.workdir / "error.log").read_text()
    # The mount's own old bytes (the lookup's 512 KiB head) still read.
    assert read_range(path, 0, 512 * 1024) == old[:512 * 1024]

    # Once the tier's old slices are gone (proxy_cache_valid ran out), the
    # mount's If-Range names the old ETag and the tier answers it with a 200
    # of the new file: the mount sees the change and drops the old bytes.
    tier.restart_tier_empty()
    tier.origin.clear_log()
    # A failed read keeps failing at once for 2 s: poll until one goes out.
    outcomes = []

    def read_16m():
        got = harness.guarded(lambda: read_range(path, 16 * MiB, 1 * MiB))
        outcomes.append(got if isinstance(got, OSError) else got == new[16 * MiB:17 * MiB])
        return not isinstance(got, OSError)

    harness.wait_until(read_16m, "a read after the tier let go of the old slices", timeout=30, interval=0.5)
    assert outcomes[-1] is True, "the read after the change returned other bytes than the new file's"
    assert all(isinstance(o, OSError) and o.errno == errno.EIO for o in outcomes[:-1]), outcomes
    tier.tier.wait_quiet()
    answers = [(e.status, e.etag) for e in tier.tier.log() if e.if_range == old_etag]
    assert answers and all(a == (200, new_etag) for a in answers), tier.tier.log()
    assert tier.origin.log() and all(e.if_range == "" for e in tier.origin.log()), "If-Range reached the origin"
    assert harness.wait_for_stderr(m, "changed on the server"), m.stderr()
    assert harness.guarded(lambda: read_whole(path), 120) == new
