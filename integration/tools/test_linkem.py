# The bench's link emulator (bench/linkem.py): the bytes it relays are the
# server's, over keep-alive and parallel connections, it adds its delay, and
# it stops by itself. Timing is checked only as a lower bound its sleeps set;
# the slow-start model is checked by bytes: its window's arithmetic with
# times given, and the window each answer started with, from its log.
import concurrent.futures
import http.client
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import harness

LINKEM = Path(__file__).resolve().parents[2] / "bench" / "linkem.py"
sys.path.insert(0, str(LINKEM.parent))
import linkem  # noqa: E402


def start_linkem(upstream_port, delay_ms, rate_mbit, extra=()):
    proc = subprocess.Popen([sys.executable, str(LINKEM), "--upstream", f"127.0.0.1:{upstream_port}",
                             "--delay-ms", str(delay_ms), "--rate-mbit", str(rate_mbit), "--lifetime", "120",
                             "--stdin-watch", *extra],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.strip().isdigit(), f"linkem printed {line!r}, rc={proc.poll()}"
    return proc, int(line)


@pytest.fixture
def link(server):
    started = []

    def start(delay_ms=0, rate_mbit=0, extra=()):
        proc, port = start_linkem(server.port, delay_ms, rate_mbit, extra)
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


@pytest.mark.parametrize("model", [(), ("--slow-start",), ("--fifo-ms", "20"), ("--slow-start", "--fifo-ms", "20")],
                         ids=["paced", "slow-start", "fifo", "slow-start-fifo"])
def test_parallel_connections_share_the_link_and_each_gets_its_own_bytes(link, source, model):
    port = link(delay_ms=5, rate_mbit=400, extra=model)
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


def test_sigusr1_closes_every_connection_and_says_how_many(server, source):
    proc, port = start_linkem(server.port, 5, 0)
    try:
        conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(2)]
        for conn in conns:
            range_get(conn, "small.bin", 0, 99)
        proc.send_signal(signal.SIGUSR1)
        assert proc.stdout.readline() == "closed 2\n"
        for conn in conns:
            assert conn.sock.recv(1) == b""  # the end of the stream: the link closed it
            conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        assert range_get(conn, "small.bin", 0, 99) == source("small.bin").read_bytes()[:100]
        conn.close()
    finally:
        proc.terminate()
        harness.stop_popen(proc, timeout=5)


def test_the_emulator_exits_when_the_process_that_started_it_closes_its_stdin(server):
    proc, _ = start_linkem(server.port, 10, 0)
    try:
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- the slow-start model

RTT = 0.125  # exact in binary: a round's acks are due exactly at the next round's start


def deliverable(window, start, rounds):
    """Bytes the sender may send in each of `rounds` round trips from
    `start`, sending all it may at each round's start (its acks come back
    one round trip later, as the emulator schedules them)."""
    out = []
    for k in range(rounds):
        now = start + k * RTT
        n = window.allowance(now)
        window.sent(now, n, now + RTT)
        out.append(n)
    return out


def test_a_fresh_window_starts_at_ten_segments_and_doubles_each_round_trip():
    w = linkem.Window(rto=0.3)
    assert deliverable(w, 0.0, 5) == [14600, 29200, 58400, 116800, 233600]
    # A 64 KiB answer on a fresh connection needs its third round trip
    # (after the handshake's and the request's): 43,800 bytes in two.
    assert sum(deliverable(linkem.Window(rto=0.3), 0.0, 2)) < 65536 <= sum(
        deliverable(linkem.Window(rto=0.3), 0.0, 3))


def test_a_warm_window_sends_in_one_round_trip_what_a_fresh_one_needs_seven_for():
    warm = linkem.Window(rto=0.3)
    deliverable(warm, 0.0, 7)  # 1.8 MB sent and acknowledged by the eighth round trip
    assert deliverable(warm, 7 * RTT, 1)[0] >= 1 << 20
    assert sum(deliverable(linkem.Window(rto=0.3), 7 * RTT, 6)) < 1 << 20 <= sum(
        deliverable(linkem.Window(rto=0.3), 7 * RTT, 7))


def test_an_idle_spell_longer_than_the_rto_drops_the_window_back_to_ten_segments():
    w = linkem.Window(rto=0.3)
    deliverable(w, 0.0, 6)               # last send at 0.625 s, acknowledged at 0.75 s
    assert w.allowance(0.9) > 900_000    # idle 0.275 s: not past the RTO, the window stays
    assert w.allowance(0.95) == linkem.INIT_WINDOW
    assert deliverable(w, 0.95, 2) == [14600, 29200]


def test_bytes_in_flight_hold_the_window_until_their_acknowledgment_arrives():
    w = linkem.Window(rto=0.3)
    w.sent(0.0, 10_000, 0.1)
    assert w.allowance(0.05) == 4600
    assert w.allowance(0.1) == 24600     # acknowledged: the window grew by what was acknowledged
    w.sent(0.1, 24600, 0.2)
    assert w.allowance(0.15) == 0 and w.next_ack() == 0.2


def test_the_window_stops_at_the_receive_window():
    w = linkem.Window(rto=10, cap=100_000)
    deliverable(w, 0.0, 10)
    assert w.cwnd == 100_000


def windows(log_path):
    return [r.get("window") for r in linkem.read_requests(log_path)]


def test_through_the_link_a_fresh_connection_starts_at_ten_segments_a_warm_one_at_what_it_grew_to(
        server, source, tmp_path):
    log = tmp_path / "requests.jsonl"
    proc, port = start_linkem(server.port, 10, 400, ["--slow-start", "--rto-ms", "150", "--requests-log", str(log)])
    want = source("big.bin").read_bytes()[:2 << 20]
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            assert range_get(conn, "big.bin", 0, (1 << 20) - 1) == want[:1 << 20]
            assert range_get(conn, "big.bin", 1 << 20, (2 << 20) - 1) == want[1 << 20:]
            time.sleep(0.5)  # idle longer than the 150 ms RTO
            assert range_get(conn, "big.bin", 0, 65535) == want[:65536]
        finally:
            conn.close()
        fresh, warm, after_idle = windows(log)
        assert fresh == linkem.INIT_WINDOW
        # The first answer's 1 MiB was acknowledged before the second left
        # (the next request crosses the link as its last acknowledgment does).
        assert warm >= linkem.INIT_WINDOW + (1 << 20) - linkem.CHUNK
        assert after_idle == linkem.INIT_WINDOW
    finally:
        proc.terminate()
        harness.stop_popen(proc, timeout=5)


def test_the_paced_model_has_no_window(server, tmp_path):
    log = tmp_path / "requests.jsonl"
    proc, port = start_linkem(server.port, 5, 0, ["--requests-log", str(log)])
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            range_get(conn, "small.bin", 0, 4095)
        finally:
            conn.close()
        assert windows(log) == [None]
    finally:
        proc.terminate()
        harness.stop_popen(proc, timeout=5)


def test_a_fresh_connections_megabyte_waits_for_its_windows_round_trips(link):
    # A lower bound the emulator's sleeps set: 1 MiB at 14,600 bytes doubling
    # needs 7 windows, after the handshake's and the request's round trips:
    # at least 8 round trips before its last byte, where the paced model
    # needs 2 plus the bytes' time at 400 Mbit/s (21 ms).
    port = link(delay_ms=20, rate_mbit=400, extra=("--slow-start",))
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        range_get(conn, "big.bin", 0, (1 << 20) - 1)
    finally:
        conn.close()
    assert time.monotonic() - t0 >= 8 * 0.04 - 0.005
