"""Reads through a server that misbehaves: one test per FaultServer behaviour.

The rule every test checks: a read returns exactly the server's bytes at that
time, or fails with EIO (ENOENT / EACCES for 404/410 and 401/403) -- never
wrong bytes, never a hang. Transient faults (drops, short bodies, 5xx, 429
with Retry-After) are retried with backoff and the read succeeds.

Each test has its own in-process FaultServer; mounts use `--timeout 10`, and
every read runs in a thread with a 60 s hang guard. Nothing measures speed:
the only timing checks are lower bounds (Retry-After honoured, backoff).
"""

import errno
import hashlib
import os
import random
import threading
import time

import pytest

import harness
from harness import data_of, gets, guarded, mount_one, read_range, read_whole, wait_for_stderr

KiB, MiB = 1024, 1024 * 1024
SERVER_WAIT = 30.0
MOUNT_ARGS = ("--timeout", "10")
GIVE_UP_HOLD = 2.0     # after a read gave up, reads of the file fail at once this long


# ---------------------------------------------------------------- helpers

def describe(records):
    lines = [f"  {r.method} {r.path} range={r.range} if-range={r.if_range} status={r.status} "
             f"sent={r.bytes_sent} completed={r.completed} t={r.started:.2f}" for r in records]
    return "\n".join(lines) or "  (no requests)"


def fingerprint(b):
    return f"{len(b)} bytes sha256 {hashlib.sha256(b).hexdigest()[:16]}"


def assert_exact(got, want, what, srv=None):
    if isinstance(got, OSError):
        pytest.fail(f"{what}: {got!r}\n{describe(srv.requests) if srv else ''}")
    if got != want:
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        pytest.fail(f"{what}: WRONG BYTES: got {fingerprint(got)}, want {fingerprint(want)}, "
                    f"first difference at {first}\n{describe(srv.requests) if srv else ''}")


def assert_exact_or_eio(got, want, what, srv=None):
    if isinstance(got, OSError):
        assert got.errno == errno.EIO, f"{what}: {got!r}, want the bytes or EIO"
        return False
    assert_exact(got, want, what, srv)
    return True


def assert_errno(result, code, what):
    assert isinstance(result, OSError), f"{what}: got {len(result)} bytes, want {errno.errorcode[code]}"
    assert result.errno == code, f"{what}: {result!r}, want {errno.errorcode[code]}"


# ---------------------------------------------------------------- drop

@pytest.mark.parametrize("rst", [False, True], ids=["fin", "rst"])
def test_connection_dropped_mid_body_is_retried_and_the_read_is_exact(mount, srv, rst):
    data = data_of(3 * MiB + 123, 1)
    m, path = mount_one(mount, srv, "drop.bin", data, extra=MOUNT_ARGS)
    srv.set_fault("drop.bin", "drop", after=300_000, times=2, rst=rst)
    assert_exact(guarded(lambda: read_whole(path)), data, "whole read through two drops", srv)
    recs = gets(srv, "drop.bin")
    assert sum(1 for r in recs if not r.completed) >= 1, f"no dropped transfer seen\n{describe(recs)}"
    # Random reads afterwards: still exact (cached bytes are the right ones).
    rng = random.Random(2)
    for _ in range(20):
        off = rng.randrange(len(data))
        size = rng.randrange(1, 200_000)
        assert_exact(guarded(lambda: read_range(path, off, size)), data[off:off + size],
                     f"pread {size} at {off}", srv)


def test_every_drop_until_retries_run_out_gives_eio_then_later_reads_recover(mount, srv):
    data = data_of(2 * MiB, 3)
    m, path = mount_one(mount, srv, "gone.bin", data, extra=MOUNT_ARGS)
    srv.set_fault("gone.bin", "drop", after=10_000)  # every GET
    got = guarded(lambda: read_range(path, MiB, 256 * KiB))
    assert_exact_or_eio(got, data[MiB:MiB + 256 * KiB], "read while every GET drops", srv)
    assert isinstance(got, OSError), "a read succeeded although every GET was cut short"
    assert len(gets(srv, "gone.bin")) <= 4 * 3, f"more tries than --retries allows\n{describe(srv.requests)}"
    srv.set_fault("gone.bin", None)
    time.sleep(GIVE_UP_HOLD + 0.5)
    assert_exact(guarded(lambda: read_whole(path)), data, "whole read after the server recovered", srv)


# ---------------------------------------------------------------- 5xx / 429

def test_503_on_every_other_request_is_retried_and_reads_are_exact(mount, srv):
    data = data_of(3 * MiB, 4)
    m, path = mount_one(mount, srv, "flaky.bin", data, extra=MOUNT_ARGS)
    srv.set_fault("flaky.bin", "status_every_other", status=503)
    assert_exact(guarded(lambda: read_whole(path)), data, "whole read with every other GET a 503", srv)
    statuses = [r.status for r in gets(srv, "flaky.bin")]
    assert 503 in statuses and 206 in statuses, statuses
    rng = random.Random(5)
    srv.set_fault("flaky.bin", "status_every_other", status=503)
    for _ in range(10):
        off = rng.randrange(len(data))
        assert_exact(guarded(lambda: read_range(path, off, 64 * KiB)), data[off:off + 64 * KiB],
                     f"pread at {off}", srv)


def test_429_with_retry_after_is_retried_no_sooner_than_it_says(mount, srv):
    data = data_of(2 * MiB, 6)
    m, path = mount_one(mount, srv, "busy.bin", data, extra=MOUNT_ARGS)
    srv.set_fault("busy.bin", "status_every_other", status=429, retry_after=1)
    # Past the first bytes, which the probe brought.
    assert_exact(guarded(lambda: read_range(path, MiB, 64 * KiB)), data[MiB:MiB + 64 * KiB], "read after a 429", srv)
    recs = gets(srv, "busy.bin")
    assert recs and recs[0].status == 429, describe(recs)
    assert len(recs) >= 2, describe(recs)
    gap = recs[1].started - recs[0].finished
    assert gap >= 0.9, f"retried {gap:.2f}s after 'Retry-After: 1'\n{describe(recs)}"


def test_persistent_500_fails_with_eio_after_the_retries_with_backoff(mount, srv):
    data = data_of(2 * MiB, 7)
    m, path = mount_one(mount, srv, "broken.bin", data, extra=(*MOUNT_ARGS, "--retries", "2"))
    srv.set_fault("broken.bin", "status", status=500)
    for _attempt in range(3):
        srv.clear_log()
        got = guarded(lambda: read_range(path, MiB, 4096))   # past the probe's first bytes
        gave_up = time.monotonic()
        assert_errno(got, errno.EIO, "read while the server answers 500")
        # Reads of the file fail at once for a while, without a request.
        tries = len(gets(srv, "broken.bin"))
        held = guarded(lambda: read_range(path, MiB + 8192, 4096))
        # The hold began a little before the give-up reached us.
        if time.monotonic() - gave_up < GIVE_UP_HOLD - 0.5:
            break
        time.sleep(GIVE_UP_HOLD)  # so that the next attempt gives up afresh
    else:
        pytest.fail("three times, the read after a give-up came after the hold was over")
    assert_errno(held, errno.EIO, "read right after one gave up")
    recs = srv.wait_idle(SERVER_WAIT)
    recs = [r for r in recs if r.method == "GET" and r.name == "broken.bin"]
    assert len(recs) == tries, f"a read within the hold after a give-up sent a request\n{describe(recs)}"
    assert len(recs) == 3, f"--retries 2 should make 3 tries\n{describe(recs)}"
    gaps = [b.started - a.finished for a, b in zip(recs, recs[1:])]
    assert gaps[0] >= 0.2 and gaps[1] >= 0.4, f"backoff 0.25 s, 0.5 s expected, gaps {gaps}"
    # The failure is logged with its URL.
    assert wait_for_stderr(m, srv.url("broken.bin")), f"no log line names the URL:\n{m.stderr()}"
    # Once the server is fixed and the hold is over, reads work.
    srv.set_fault("broken.bin", None)
    time.sleep(GIVE_UP_HOLD + 0.5)
    assert_exact(guarded(lambda: read_whole(path)), data, "whole read after the server recovered", srv)


# ---------------------------------------------------------------- drip

def test_slowly_dripping_server_still_gives_exact_bytes(mount, srv):
    data = data_of(300 * KiB, 8)
    m, path = mount_one(mount, srv, "slow.bin", data, extra=MOUNT_ARGS)
    srv.set_fault("slow.bin", "drip", bytes_per_sec=150_000, chunk=1500, delay=0.3)
    assert_exact(guarded(lambda: read_whole(path)), data, "read from a dripping server", srv)


# ---------------------------------------------------------------- ignore_range

def test_server_ignoring_range_sequential_read_is_exact(mount, srv):
    data = data_of(3 * MiB + 77, 9)
    srv.add("norange.bin", data)
    srv.set_fault("norange.bin", "ignore_range")
    m = mount(srv.url("norange.bin"), extra=MOUNT_ARGS)
    path = m.path("norange.bin")
    assert os.stat(path).st_size == len(data)
    assert_exact(guarded(lambda: read_whole(path)), data, "sequential read without ranges", srv)
    assert all(r.status == 200 for r in gets(srv, "norange.bin"))


def test_server_ignoring_range_far_and_concurrent_reads_join_one_stream(mount, srv):
    data = data_of(4 * MiB, 10)
    srv.add("norange.bin", data)
    srv.set_fault("norange.bin", "ignore_range")
    m = mount(srv.url("norange.bin"), extra=MOUNT_ARGS)
    path = m.path("norange.bin")
    assert os.stat(path).st_size == len(data)
    srv.wait_idle(SERVER_WAIT)
    srv.clear_log()
    offsets = [3 * MiB + 5, 0, 2 * MiB - 100, MiB + 1]
    results = {}

    def reader(off):
        results[off] = read_range(path, off, 100_000)

    threads = [threading.Thread(target=lambda o=o: guarded(lambda: reader(o)), daemon=True) for o in offsets]
    for t in threads:
        t.start()
        time.sleep(0.02)
    for t in threads:
        t.join(harness.READ_DEADLINE + 5)
    for off in offsets:
        assert off in results, f"read at {off} failed or hung\n{describe(srv.requests)}"
        assert_exact(results[off], data[off:off + 100_000], f"read at {off} without ranges", srv)
    recs = gets(srv, "norange.bin")
    assert len(recs) == 1, f"expected one stream from byte 0 that every reader joins\n{describe(recs)}"


# ---------------------------------------------------------------- other_range

def test_206_for_another_range_is_placed_where_content_range_says(mount, srv):
    data = data_of(2 * MiB, 11)
    m, path = mount_one(mount, srv, "shifted.bin", data, extra=(*MOUNT_ARGS, "--retries", "1"))
    srv.set_fault("shifted.bin", "other_range", shift=4096)
    rng = random.Random(12)
    spots = [0, 4096, 100_000, MiB, len(data) - 5000, len(data) - 100]
    spots += [rng.randrange(len(data)) for _ in range(4)]
    exact = {}
    for off in spots:
        size = min(20_000, len(data) - off)
        got = guarded(lambda: read_range(path, off, size))
        exact[off] = assert_exact_or_eio(got, data[off:off + size], f"pread {size} at {off} (shifted 206s)", srv)
        time.sleep(0.05)
    # The read at 0 was answered with bytes 4096-24095: placed where
    # Content-Range says, they serve the read at 4096 whole.
    assert exact[4096], f"the read at 4096 was not served by the shifted answer to the read at 0: {exact}"
    assert any(r.status == 206 for r in gets(srv, "shifted.bin"))
    # Whatever was cached from the shifted answers must be the right bytes.
    srv.set_fault("shifted.bin", None)
    time.sleep(GIVE_UP_HOLD + 0.5)
    assert_exact(guarded(lambda: read_whole(path)), data, "whole read after the shifted answers", srv)


# ---------------------------------------------------------------- redirect

@pytest.mark.parametrize("code", [301, 302, 307, 308])
def test_redirect_is_followed_and_cached_under_the_original_url(mount, srv, tmp_path, code):
    data = data_of(600 * KiB, 13)
    srv.add("moved.bin", data)
    srv.set_fault("moved.bin", "redirect", code=code)
    url = srv.url("moved.bin")
    cache = tmp_path / "shared-cache"
    m = mount(url, extra=MOUNT_ARGS, cache_dir=cache)
    path = m.path("moved.bin")
    assert os.stat(path).st_size == len(data)
    assert_exact(guarded(lambda: read_whole(path)), data, f"read through a {code}", srv)
    assert any(r.path.startswith("/_real/") for r in gets(srv)), describe(srv.requests)
    assert os.getxattr(path, "user.mediafs.url").decode() == url
    wanted = hashlib.sha256(url.encode()).hexdigest()
    assert (cache / "v1" / wanted[:2] / wanted).is_dir(), \
        f"no cache entry for the original URL: {sorted(p.name for p in (cache / 'v1').glob('*/*'))}"
    m.unmount()
    srv.wait_idle(SERVER_WAIT)
    srv.clear_log()
    m2 = mount(url, extra=MOUNT_ARGS, cache_dir=cache)
    assert_exact(guarded(lambda: read_whole(m2.path("moved.bin"))), data, "read after remount", srv)
    time.sleep(0.5)
    assert srv.requests == [], f"cached bytes of a redirected URL were fetched again\n{describe(srv.requests)}"


# ---------------------------------------------------------------- change

@pytest.mark.parametrize("how", ["change_fault", "replace"])
def test_content_change_between_requests_never_mixes_versions(mount, srv, how):
    old = data_of(4 * MiB, 14)
    new = data_of(4 * MiB, 15)
    m, path = mount_one(mount, srv, "live.bin", old, extra=(*MOUNT_ARGS, "--revalidate", "never"))
    old_etag = srv.etag("live.bin")
    got = guarded(lambda: read_range(path, 0, 256 * KiB))
    assert_exact(got, old[:256 * KiB], "first read, before the change", srv)
    if how == "replace":
        srv.replace("live.bin", new)
    else:
        srv.set_fault("live.bin", "change", after=0, new_data=new)
    new_etag = srv.etag("live.bin") if how == "replace" else None
    # A read of uncached bytes now sees the change: the new bytes or EIO.
    got = guarded(lambda: read_range(path, 2 * MiB, 256 * KiB))
    if isinstance(got, OSError):
        assert got.errno == errno.EIO, repr(got)
    else:
        assert got == new[2 * MiB:2 * MiB + 256 * KiB], (
            "read after the change gave " + ("OLD bytes" if got == old[2 * MiB:2 * MiB + 256 * KiB]
                                             else "bytes of neither version"))
    ranged = [r for r in gets(srv, "live.bin") if r.range]
    assert ranged and all(r.if_range for r in ranged), f"If-Range not sent\n{describe(ranged)}"
    assert ranged[0].if_range == old_etag, describe(ranged)
    # Later reads: exactly the new content, including the first 256 KiB read before.
    time.sleep(GIVE_UP_HOLD + 0.5)
    whole = guarded(lambda: read_whole(path))
    if isinstance(whole, OSError):  # a read in flight at the change may fail once more
        time.sleep(GIVE_UP_HOLD + 0.5)
        whole = guarded(lambda: read_whole(path))
    assert_exact(whole, new, "whole read after the change", srv)
    assert_exact(guarded(lambda: read_range(path, 0, 256 * KiB)), new[:256 * KiB],
                 "bytes cached before the change are not served after it", srv)
    if new_etag:
        assert os.getxattr(path, "user.mediafs.etag").decode() == new_etag


def test_content_change_during_one_read_syscall_fails_it_rather_than_mixing(mount, srv):
    """One read(2) of the whole file while the file changes on the server:
    the bytes of one version, or EIO -- never old bytes followed by new ones.
    (mediafs fails the FUSE reads in flight, but the kernel retries the
    failed pages and a retry served the new version is appended to the old
    pages already copied.)"""
    old = data_of(8 * MiB, 16)
    new = data_of(8 * MiB, 17)
    m, path = mount_one(mount, srv, "live.bin", old, extra=(*MOUNT_ARGS, "--revalidate", "never"))
    srv.set_fault("live.bin", "drip", bytes_per_sec=2 * MiB, chunk=64 * KiB)

    def changer():
        # Once a MiB has gone out, in whatever requests: the rest of the
        # read's requests meet the new version (a long transfer, which
        # mediafs makes once the read streams, would bring old bytes to the
        # end if it began first).
        srv.wait_for(lambda rs: sum(r.bytes_sent for r in rs) > MiB, timeout=SERVER_WAIT)
        srv.replace("live.bin", new)
        srv.set_fault("live.bin", None)

    t = threading.Thread(target=changer, daemon=True)
    t.start()
    calls = []  # (offset, bytes or OSError) per read(2)

    def read_syscalls():
        fd = os.open(path, os.O_RDONLY)
        try:
            off = 0
            while True:
                try:
                    b = os.read(fd, len(old) + 1)
                except OSError as e:
                    calls.append((off, e))
                    return
                if not b:
                    return
                calls.append((off, b))
                off += len(b)
        finally:
            os.close(fd)

    guarded(read_syscalls)
    t.join(SERVER_WAIT)

    def kind(off, b):
        if isinstance(b, OSError):
            return repr(b)
        if b == old[off:off + len(b)]:
            return "old"
        if b == new[off:off + len(b)]:
            return "new"
        po = sum(b[i:i + 4096] == old[off + i:off + i + 4096] for i in range(0, len(b), 4096))
        pn = sum(b[i:i + 4096] == new[off + i:off + i + 4096] for i in range(0, len(b), 4096))
        return f"MIX ({po} pages old, {pn} pages new)"

    report = "\n".join(f"  read(2) at {off}: {len(b) if isinstance(b, bytes) else ''} {kind(off, b)}"
                       for off, b in calls)
    for off, b in calls:
        if isinstance(b, OSError):
            assert b.errno == errno.EIO, report
    kinds = {kind(off, b) for off, b in calls if isinstance(b, bytes)}
    assert not any(k.startswith("MIX") for k in kinds), (
        f"one read(2) returned two versions of the file:\n{report}\n" + describe(srv.requests) + m.stderr())
    assert kinds <= {"old"} or kinds <= {"new"}, (
        f"one open file read two versions:\n{report}\n" + describe(srv.requests))
    time.sleep(GIVE_UP_HOLD + 0.5)
    assert_exact(guarded(lambda: read_whole(path)), new, "whole read after the change", srv)


# ---------------------------------------------------------------- short

def test_short_body_once_is_retried_and_the_read_is_exact(mount, srv):
    data = data_of(2 * MiB, 18)
    m, path = mount_one(mount, srv, "short.bin", data, extra=MOUNT_ARGS)
    srv.set_fault("short.bin", "short", missing=1000)

    def heal():
        srv.wait_for(lambda rs: any(r.done and r.method == "GET" for r in rs), timeout=SERVER_WAIT)
        srv.set_fault("short.bin", None)

    t = threading.Thread(target=heal, daemon=True)
    t.start()
    # Past the first bytes, which the probe brought.
    assert_exact(guarded(lambda: read_range(path, MiB, 512 * KiB)), data[MiB:MiB + 512 * KiB],
                 "read after a short body", srv)
    t.join(SERVER_WAIT)
    recs = gets(srv, "short.bin")
    assert recs[0].completed is False, describe(recs)
    assert_exact(guarded(lambda: read_whole(path)), data, "whole read", srv)


def test_always_short_bodies_give_eio_never_the_missing_bytes(mount, srv):
    data = data_of(1 * MiB, 19)
    m, path = mount_one(mount, srv, "short.bin", data, extra=MOUNT_ARGS)
    srv.set_fault("short.bin", "short", missing=1000)
    got = guarded(lambda: read_range(path, 0, 256 * KiB))
    assert_exact_or_eio(got, data[:256 * KiB], "read while every body is short", srv)
    srv.set_fault("short.bin", None)
    time.sleep(GIVE_UP_HOLD + 0.5)
    assert_exact(guarded(lambda: read_whole(path)), data, "whole read after the server recovered", srv)


# ---------------------------------------------------------------- no_head / no_length

def test_server_without_head_gets_size_from_a_ranged_get(mount, srv):
    data = data_of(777_777, 20)
    srv.add("nohead.bin", data)
    srv.set_fault("nohead.bin", "no_head")
    m = mount(srv.url("nohead.bin"), extra=MOUNT_ARGS)
    path = m.path("nohead.bin")
    assert os.stat(path).st_size == len(data)
    recs = srv.wait_idle(SERVER_WAIT)
    assert any(r.method == "GET" and r.status == 206 and r.range.startswith("bytes=0-") for r in recs), describe(recs)
    assert_exact(guarded(lambda: read_whole(path)), data, "read without HEAD", srv)


@pytest.mark.parametrize("chunked", [False, True], ids=["close-delimited", "chunked"])
def test_server_without_content_length_reads_are_exact_or_eio(mount, srv, chunked):
    data = data_of(300 * KiB, 21)
    srv.add("nolen.bin", data)
    srv.set_fault("nolen.bin", "no_length", chunked=chunked)
    m = mount(srv.url("nolen.bin"), extra=MOUNT_ARGS)
    path = m.path("nolen.bin")
    try:
        size = os.stat(path).st_size
    except OSError as e:
        assert e.errno == errno.EIO, repr(e)
        return
    assert size == len(data), "a length learned from somewhere must be the right one"
    assert_exact_or_eio(guarded(lambda: read_whole(path)), data, "read without Content-Length", srv)


# ---------------------------------------------------------------- status → errno

@pytest.mark.parametrize("status,code", [(404, errno.ENOENT), (410, errno.ENOENT),
                                         (401, errno.EACCES), (403, errno.EACCES)])
def test_http_status_maps_to_errno_at_probe(mount, srv, status, code):
    srv.add("denied.bin", b"x" * 1000)
    srv.add("fine.bin", b"y" * 1000)
    srv.set_fault("denied.bin", "status", status=status)
    m = mount(srv.url("denied.bin"), srv.url("fine.bin"), extra=MOUNT_ARGS)
    got = guarded(lambda: os.stat(m.path("denied.bin")))
    assert_errno(got, code, f"stat of a URL answering {status}")
    got = guarded(lambda: read_whole(m.path("denied.bin")))
    assert_errno(got, code, f"open of a URL answering {status}")
    assert read_whole(m.path("fine.bin")) == b"y" * 1000
    assert wait_for_stderr(m, srv.url("denied.bin")), m.stderr()


@pytest.mark.parametrize("status,code", [(404, errno.ENOENT), (410, errno.ENOENT),
                                         (401, errno.EACCES), (403, errno.EACCES)])
def test_http_status_maps_to_errno_at_read(mount, srv, status, code):
    data = data_of(2 * MiB, 22)
    m, path = mount_one(mount, srv, "later.bin", data, extra=MOUNT_ARGS)
    srv.set_fault("later.bin", "status", status=status)
    got = guarded(lambda: read_range(path, MiB, 4096))   # past the probe's first bytes
    assert isinstance(got, OSError), f"read gave {len(got)} bytes while the server answers {status}"
    assert got.errno in (code, errno.EIO), f"{got!r} for {status}, want {errno.errorcode[code]}"
    assert got.errno == code, f"{got!r} for {status} at read time, want {errno.errorcode[code]}"
    recs = gets(srv, "later.bin")
    assert len(recs) == 1, f"a {status} is not transient and should not be retried\n{describe(recs)}"
