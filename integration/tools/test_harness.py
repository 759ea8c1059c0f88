"""The harness itself: the test server serves what the mount tests assume.
These run without mediafs, so a red suite points at the right side."""

import email.utils
import urllib.request

from conftest import BIG_SIZE, DATA_FILES


def fetch(url, headers=None):
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
        return r.status, dict(r.headers), r.read()


def test_server_answers_range_request_with_206_and_logs_it(server, source):
    status, headers, body = fetch(server.url("small.bin"), {"Range": "bytes=100-199"})
    assert status == 206
    assert body == source("small.bin").read_bytes()[100:200]
    assert headers["Content-Range"] == f"bytes 100-199/{source('small.bin').stat().st_size}"
    server.wait_quiet(quiet=0.3)
    [entry] = server.log()
    assert (entry.method, entry.uri, entry.range, entry.status, entry.sent) == \
        ("GET", "/small.bin", "bytes=100-199", 206, 100)
    assert entry.span() == (100, 200)


def test_server_sends_last_modified_equal_to_source_mtime(server, source):
    for df in DATA_FILES:
        _, headers, _ = fetch(server.url(df.rel), {"Range": "bytes=0-0"} if df.size else None)
        served = email.utils.parsedate_to_datetime(headers["Last-Modified"]).timestamp()
        assert served == int(source(df.rel).stat().st_mtime) == df.mtime, df.rel


def test_data_has_expected_sizes(source):
    assert source("big.bin").stat().st_size == BIG_SIZE
    assert source("empty.bin").stat().st_size == 0
    assert source("sample.mp4").stat().st_size > 10_000


def test_server_can_be_stopped_and_restarted(server):
    server.stop()
    assert not server.running
    server.start()
    status, _, _ = fetch(server.url("small.bin"), {"Range": "bytes=0-0"})
    assert status == 206


def test_clear_log_empties_the_log(server):
    fetch(server.url("small.bin"), {"Range": "bytes=0-0"})
    server.wait_quiet(quiet=0.3)
    assert server.log()
    server.clear_log()
    assert server.log() == []
