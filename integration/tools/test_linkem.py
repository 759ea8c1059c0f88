# The bench's link emulator (bench/linkem.py): the bytes it relays are the
# server's, over keep-alive and parallel connections, it adds its delay, and
# it stops by itself. Timing is checked only as a lower bound its sleeps set.
import concurrent.futures
import http.client
import subprocess
import sys
import time
from pathlib import Path

import pytest

import harness

LINKEM = Path(__file__).resolve().parents[2] / "bench" / "linkem.py"


def start_linkem(upstream_port, delay_ms, rate_mbit):
    proc = subprocess.Popen([sys.executable, str(LINKEM), "--upstream", f"127.0.0.1:{upstream_port}",
                             "--delay-ms", str(delay_ms), "--rate-mbit", str(rate_mbit), "--lifetime", "120",
                             "--stdin-watch"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.strip().isdigit(), f"linkem printed {line!r}, rc={proc.poll()}"
    return proc, int(line)


@pytest.fixture
def link(server):
    started = []

    def start(delay_ms=0, rate_mbit=0):
        proc, port = start_linkem(server.port, delay_ms, rate_mbit)
        started.append(proc)
        return port
    yield start
    for proc in started:
        proc.terminate()
        harness.stop_popen(proc, timeout=5)


def range_get(conn, rel, first, last):
    conn.request("GET", "/" + rel, headers={"Range": f"bytes={first}-{last}"})
    r = conn.getresponse()
    body = r.read()
    assert r.status == 206
    return body


def test_keep_alive_requests_through_the_link_return_the_servers_bytes_on_one_connection(link, server, source):
    port = link(delay_ms=5, rate_mbit=400)
    want = source("big.bin").read_bytes()[:3 << 20]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        assert range_get(conn, "big.bin", 0, 4095) == want[:4096]
        sock = conn.sock
        assert range_get(conn, "big.bin", 1 << 20, (3 << 20) - 1) == want[1 << 20:]
        assert conn.sock is sock, "the link closed a keep-alive connection"
    finally:
        conn.close()
    server.wait_quiet(quiet=0.3)
    assert [e.range for e in server.log() if e.method == "GET"] == ["bytes=0-4095", f"bytes={1 << 20}-{(3 << 20) - 1}"]


def test_parallel_connections_share_the_link_and_each_gets_its_own_bytes(link, source):
    port = link(delay_ms=5, rate_mbit=400)
    data = source("big.bin").read_bytes()[:8 << 20]

    def fetch(i):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            return range_get(conn, "big.bin", i << 20, ((i + 1) << 20) - 1)
        finally:
            conn.close()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        bodies = list(pool.map(fetch, range(8)))
    assert bodies == [data[i << 20:(i + 1) << 20] for i in range(8)]


def test_a_request_on_a_new_connection_waits_for_setup_and_request_round_trips(link):
    port = link(delay_ms=100)
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        range_get(conn, "small.bin", 0, 0)
        first = time.monotonic() - t0
        t1 = time.monotonic()
        range_get(conn, "small.bin", 0, 0)
        second = time.monotonic() - t1
    finally:
        conn.close()
    # Lower bounds only: the emulator sleeps at least this long (asyncio may
    # wake a callback up to a millisecond early).
    assert first >= 0.39
    assert second >= 0.19


def test_the_emulator_exits_when_the_process_that_started_it_closes_its_stdin(server):
    proc, _ = start_linkem(server.port, 10, 0)
    try:
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
