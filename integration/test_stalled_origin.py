"""An origin that stalls holds the reads waiting on it, never the mount.

Each read waiting for bytes holds a FUSE request for up to `--timeout`: in
the kernel, which sends only `max_background` reads at once (queueing any
other read of the mount, cached or not, behind them), and in one of the
daemon's threads (without a free one, no lookup or stat is answered).
With 32 reads waiting on one file of a stalled origin, all 32 must be in
the daemon at once, and a stat, an open and a read of a file wholly in the
cache must still be answered, by the daemon, far sooner than `--timeout`.

The origin stalls before its response headers (drip with a long delay)
until the server is stopped, which releases every held request. Nothing
measures speed: the bound on the cached file's requests is a sixth of the
timeout, only there to tell "answered" from "waiting behind the stall".
"""

import errno
import os
import re
import threading
import time
import urllib.request

import pytest

import harness
from harness import data_of, free_port, gets, pread_direct, read_whole, wait_until, xget

KiB, MiB = 1024, 1024 * 1024
TIMEOUT = 60           # --timeout: how long a read waits on the stalled origin
ANSWERED_WITHIN = 10   # far below TIMEOUT: a request that does not wait on it
READERS = 32           # reads waiting on the stall at once, twice the old thread count
PER_ORIGIN = 8         # transfers mediafs runs at once per origin (TransferAdmission)
KERNEL_DEFAULT_BACKGROUND = 12   # reads the kernel sends at once unless told more (max_background)
SERVER_WAIT = 30.0


def describe(records):
    return "\n".join(f"  {r.method} {r.name} {r.range} status={r.status} sent={r.bytes_sent} done={r.done}"
                     for r in records) or "  (no requests)"


def transfers_in_flight(port):
    """The daemon's count of its started transfers, from the metrics
    responder: its own thread, so it answers whatever holds FUSE's."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.search(r"^mediafs_transfers_in_flight (\d+)", text, re.M)
    assert found, f"no mediafs_transfers_in_flight in the metrics:\n{text}"
    return int(found.group(1))


def answered_within(fn, what, threads):
    """fn()'s value, run in a thread added to `threads`; fails the test if
    it is still waiting after ANSWERED_WITHIN (the stall's release ends it)."""
    box = {}

    def work():
        try:
            box["value"] = fn()
        except BaseException as e:  # re-raised in the test's thread
            box["error"] = e

    t = threading.Thread(target=work, daemon=True)
    threads.append(t)
    t.start()
    t.join(ANSWERED_WITHIN)
    if t.is_alive():
        pytest.fail(f"{what} still waiting after {ANSWERED_WITHIN} s, while {READERS} reads of another "
                    f"file wait on a stalled origin (--timeout {TIMEOUT})")
    if "error" in box:
        raise box["error"]
    return box["value"]


def join_all(threads, timeout):
    """Join every thread within one shared bound; whether all ended."""
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return not any(t.is_alive() for t in threads)


def test_reads_waiting_on_a_stalled_origin_leave_a_cached_file_answered(mount, srv):
    cached, stalled = data_of(2 * MiB, 61), data_of((READERS + 2) * MiB, 62)
    srv.add("cached.bin", cached)
    srv.add("stalled.bin", stalled)
    port = free_port()
    # Without passthrough, the cached file's reads are answered by the daemon
    # (not by the kernel from the backing file): they need one of its threads.
    m = mount(srv.url("cached.bin"), srv.url("stalled.bin"),
              extra=("--timeout", str(TIMEOUT), "--no-passthrough", "--metrics", f"127.0.0.1:{port}"))
    cached_path, stalled_path = m.path("cached.bin"), m.path("stalled.bin")
    assert read_whole(cached_path) == cached
    assert xget(cached_path, "complete") == "1"
    assert os.stat(stalled_path).st_size == len(stalled)
    srv.wait_idle(SERVER_WAIT)
    srv.clear_log()

    srv.set_fault("stalled.bin", "drip", delay=10 * TIMEOUT)
    # Past the first bytes (the probe's), a MiB apart: each read its own transfer.
    offsets = [(i + 1) * MiB + 4 * KiB * i for i in range(READERS)]
    results, readers = {}, []

    def reader(offset):
        try:
            results[offset] = harness.pread_uncached(stalled_path, offset, 4 * KiB)
        except OSError as e:  # the release ends it with EIO
            results[offset] = e

    probes = []
    try:
        for offset in offsets:
            t = threading.Thread(target=reader, args=(offset,), daemon=True)
            t.start()
            readers.append(t)
        # Really waiting at once: the origin holds as many GETs as mediafs
        # runs on it, and more reads than that wait in the daemon.
        srv.wait_for(lambda rs: len([r for r in rs if r.method == "GET" and not r.done]) >= PER_ORIGIN,
                     SERVER_WAIT)
        wait_until(lambda: transfers_in_flight(port) >= KERNEL_DEFAULT_BACKGROUND,
                   f"{KERNEL_DEFAULT_BACKGROUND} reads of the stalled file to reach mediafs")
        assert not any(r.done for r in gets(srv, "stalled.bin")), describe(srv.requests)
        # The kernel believes a name for 1 s (entry_timeout): past that, the
        # stat below is a lookup the daemon must answer.
        time.sleep(1.5)

        info = answered_within(lambda: os.stat(cached_path), "stat of the cached file", probes)
        assert info.st_size == len(cached)
        # Open and read: O_DIRECT, so the read is the daemon's to answer, not
        # the page cache's.
        at = 1 * MiB
        got = answered_within(lambda: pread_direct(cached_path, at, 64 * KiB), "open and read of the cached file",
                              probes)
        assert got == cached[at:at + 64 * KiB]

        # Every reader was in the daemon at once, not queued in the kernel.
        wait_until(lambda: transfers_in_flight(port) >= READERS, f"all {READERS} stalled reads to reach mediafs")
        # And the stall held throughout: the answers above did not wait for it.
        assert not any(r.done for r in gets(srv, "stalled.bin")), describe(srv.requests)
    finally:
        # Release: stopping the server lets go of every held request.
        srv.stop()
        if not join_all(readers + probes, harness.READ_DEADLINE):
            m.unmount()
            join_all(readers + probes, harness.READ_DEADLINE)
    assert not any(t.is_alive() for t in readers + probes), "threads still blocked after the mount was gone"

    # The cached file was answered from the cache: the origin never saw it.
    assert gets(srv, "cached.bin") == [], describe(srv.requests)
    # The stalled GETs asked only for what the readers wanted.
    wanted = {f"bytes={o}-{o + 4 * KiB - 1}" for o in offsets}
    stray = [r for r in gets(srv, "stalled.bin") if r.range not in wanted]
    assert not stray, f"GETs for bytes no reader asked for:\n{describe(stray)}"
    # No byte ever came: with the server gone, each read ends in EIO, not a hang.
    for offset in offsets:
        got = results.get(offset)
        assert isinstance(got, OSError) and got.errno == errno.EIO, f"read at {offset}: {got!r}, want EIO"
