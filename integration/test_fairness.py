"""An origin's connections are shared fairly among files: with 24 reads of
one file waiting on a slow server, a read of another file from the same
origin (scheme, host, port) takes the next free place, ahead of that deep
queue. Counted by the order in which the server sees the requests, never by
the clock."""

import json
import os

from harness import data_of, gets, in_thread, pread_direct, wait_until, xget

KiB, MiB = 1024, 1024 * 1024
SERVER_WAIT = 30.0  # waiting for the server to see / finish a request
PER_ORIGIN = 8      # CurlFetcher.maxConnectionsPerHost: transfers running per origin


def stats(m):
    return json.loads(xget(m.mountpoint, "stats"))


def describe(records):
    return "\n".join(f"  {r.method} {r.name} {r.range} status={r.status} sent={r.bytes_sent}"
                     for r in records) or "  (no requests)"


def test_a_read_of_another_file_takes_the_next_free_place_ahead_of_24_waiting_reads(mount, srv):
    """Eight readers of a.bin, each waiting on three holes (cached pieces
    between them), make 24 transfers: 8 run on the slow server, 16 queue.
    Then a read of b.bin, same origin: the server must see its GET at the
    next free place, before a.bin's queued GETs. Eight readers, not 24: the
    kernel sends at most max_background reads at once (12 unless the daemon
    asks for more, as mediafs now does), and b.bin's read must be one of
    them to reach mediafs at all: eight stay under either."""
    size = 16 * MiB
    data_a, data_b = data_of(size, 41), data_of(size, 42)
    srv.add("a.bin", data_a)
    srv.add("b.bin", data_b)
    m = mount(srv.url("a.bin"), srv.url("b.bin"), extra=("--timeout", "60"))
    path_a, path_b = m.path("a.bin"), m.path("b.bin")
    # Listed first, so the stats wait on HEAD probes, not a lookup's GET of
    # the first bytes (which would cache some of the pieces below).
    assert sorted(os.listdir(m.mountpoint)) == ["a.bin", "b.bin"]
    assert os.stat(path_a).st_size == size and os.stat(path_b).st_size == size

    readers, holes, piece = 8, 3, 32 * KiB
    bases = [i * MiB for i in range(readers)]
    # A reader's range: hole, cached piece, hole, cached piece, hole.
    cached = [base + (2 * k + 1) * piece for base in bases for k in range(holes - 1)]
    for start in cached:
        assert pread_direct(path_a, start, piece) == data_a[start:start + piece]
    srv.wait_idle(SERVER_WAIT)
    assert [r.range for r in gets(srv, "a.bin")] == [f"bytes={s}-{s + piece - 1}" for s in cached], \
        describe(srv.requests)
    srv.clear_log()

    # a.bin's GETs wait at the server until the test lets them go, so the
    # order of free places is the test's, not a clock's.
    srv.set_fault("a.bin", "hold")
    length = (2 * holes - 1) * piece
    joins = [in_thread(lambda b=b: pread_direct(path_a, b, length)) for b in bases]
    waiting = holes * readers
    srv.wait_for(lambda rs: len([r for r in rs if r.method == "GET"]) >= PER_ORIGIN, SERVER_WAIT)
    wait_until(lambda: stats(m)["transfers_in_flight"] >= waiting,
               "every read of a.bin to start its transfers")
    join_b = in_thread(lambda: pread_direct(path_b, 0, 2 * piece))
    wait_until(lambda: stats(m)["transfers_in_flight"] >= waiting + 1, "the read of b.bin to ask for its bytes")
    seen_before = len(gets(srv))
    assert seen_before == PER_ORIGIN, describe(srv.requests)
    # One place frees: it must go to b.bin, not to one of a.bin's 16.
    srv.release("a.bin", count=1)
    srv.wait_for(lambda rs: len([r for r in rs if r.method == "GET"]) > PER_ORIGIN, SERVER_WAIT)
    srv.release("a.bin")
    assert join_b() == data_b[:2 * piece]
    for base, join in zip(bases, joins):
        assert join() == data_a[base:base + length], base
    order = [r.name for r in gets(srv)]
    assert order.count("a.bin") == waiting, describe(srv.requests)
    at = order.index("b.bin")
    assert at == seen_before, (
        f"b.bin's GET came after {at} of a.bin's ({seen_before} were sent when it was asked for); "
        f"expected at the next free place, ahead of a.bin's {waiting - PER_ORIGIN} queued\n"
        f"{describe(srv.requests)}")
