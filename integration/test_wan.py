"""Round trips a cold read saves (issue 12), counted at the server.

A lookup's probe is a ranged GET whose bytes are kept, so the first read
sends nothing more; a fetch ending near the end of the file reaches it; a
cold ffprobe of an mp4 with its index at the end takes few requests.
Functional only: timeouts are bounds against a hang, never measurements.
"""

import json
import os
import subprocess

from harness import data_of, pread_uncached, xget

KiB, MiB = 1024, 1024 * 1024
PROBE_BYTES = 512 * KiB     # LoaderSettings.probeFirstBytes
TAIL_STRETCH = 256 * KiB    # LoaderSettings.tailStretch
WAIT = 30.0


def describe(records):
    return "\n".join(f"  {r.method} {r.range} status={r.status} sent={r.bytes_sent}" for r in records) \
        or "  (no requests)"


def test_a_lookup_probes_with_one_ranged_get_and_the_first_read_sends_nothing_more(mount, srv):
    data = data_of(4 * MiB, 21)
    srv.add("first.bin", data)
    m = mount(srv.url("first.bin"))
    path = m.path("first.bin")
    assert os.stat(path).st_size == len(data)
    assert pread_uncached(path, 0, 4096) == data[:4096]
    assert pread_uncached(path, 100 * KiB, 64 * KiB) == data[100 * KiB:164 * KiB]
    recs = srv.wait_idle(WAIT)
    assert [(r.method, r.range) for r in recs] == [("GET", f"bytes=0-{PROBE_BYTES - 1}")], describe(recs)


def test_a_listings_background_probes_stay_head_only(mount, srv):
    names = {"one.bin": data_of(300 * KiB, 22), "two.bin": data_of(400 * KiB, 23)}
    for name, data in names.items():
        srv.add(f"media/{name}", data)
    rows = "\n".join(f'<a href="{n}">{n}</a>' for n in sorted(names))
    srv.add("media/", f"<html><body><pre>{rows}</pre></body></html>\n".encode(), content_type="text/html")
    m = mount(srv.url("media/"))
    assert sorted(os.listdir(m.mountpoint)) == sorted(names)
    probes = srv.wait_for(lambda recs: (lambda p: p if len(p) >= 2 else None)(
        [r for r in recs if r.path != "/media/"]), timeout=WAIT)
    assert probes, describe(srv.requests)
    srv.wait_idle(WAIT)
    probes = [r for r in srv.requests if r.path != "/media/"]
    assert all(r.method == "HEAD" for r in probes), describe(probes)


def test_a_read_that_would_end_near_the_end_of_the_file_fetches_to_the_end(mount, srv):
    size = 8 * MiB + 1234
    data = data_of(size, 24)
    srv.add("tail.bin", data)
    m = mount(srv.url("tail.bin"))
    path = m.path("tail.bin")
    assert os.stat(path).st_size == size
    srv.wait_idle(WAIT)
    srv.clear_log()
    offset = (size - 200 * KiB) // 4096 * 4096   # the kernel reads whole pages
    assert pread_uncached(path, offset, 4096) == data[offset:offset + 4096]
    assert pread_uncached(path, size - 4096, 4096) == data[-4096:]
    recs = srv.wait_idle(WAIT)
    assert len(recs) == 1 and recs[0].range in (f"bytes={offset}-{size - 1}", f"bytes={offset}-"), describe(recs)
    assert recs[0].bytes_sent == size - offset, describe(recs)


def test_a_read_far_from_the_end_is_not_stretched(mount, srv):
    size = 8 * MiB
    data = data_of(size, 25)
    srv.add("mid.bin", data)
    m = mount(srv.url("mid.bin"))
    path = m.path("mid.bin")
    assert os.stat(path).st_size == size
    srv.wait_idle(WAIT)
    srv.clear_log()
    offset = size - TAIL_STRETCH - 64 * KiB
    assert pread_uncached(path, offset, 4096) == data[offset:offset + 4096]
    recs = srv.wait_idle(WAIT)
    assert sum(r.bytes_sent for r in recs) < 64 * KiB, describe(recs)


def test_an_empty_file_probed_with_a_ranged_get_reads_empty(mount, srv):
    srv.add("empty.bin", b"")
    m = mount(srv.url("empty.bin"))
    path = m.path("empty.bin")
    assert os.stat(path).st_size == 0
    assert open(path, "rb").read() == b""
    recs = srv.wait_idle(WAIT)
    assert len(recs) <= 2 and all(r.bytes_sent == 0 for r in recs), describe(recs)


def test_a_server_without_ranges_answers_the_probe_and_every_byte_reads_right(mount, srv):
    data = data_of(3 * MiB + 17, 26)
    srv.add("whole.bin", data)
    srv.set_fault("whole.bin", "ignore_range")
    m = mount(srv.url("whole.bin"))
    path = m.path("whole.bin")
    assert os.stat(path).st_size == len(data)
    assert open(path, "rb").read() == data
    assert pread_uncached(path, 2 * MiB, 4096) == data[2 * MiB:2 * MiB + 4096]


def moov_at_end_mp4(path):
    """A few MiB of mp4 with its `moov` after `mdat` (ffmpeg's default)."""
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc2=size=640x360:rate=25", "-t", "10", "-c:v", "libx264", "-preset", "ultrafast",
                    "-qp", "0", "-f", "mp4", str(path)], check=True, timeout=120)
    data = path.read_bytes()
    assert data.find(b"moov") > data.find(b"mdat") > 0, "ffmpeg wrote moov before mdat"
    assert len(data) > 3 * PROBE_BYTES, f"only {len(data)} bytes: too small to tell"
    return data


def test_a_cold_ffprobe_of_a_moov_at_the_end_mp4_takes_few_requests_and_little(mount, srv, tmp_path):
    srv.add("late-moov.mp4", moov_at_end_mp4(tmp_path / "late-moov.mp4"), content_type="video/mp4")
    m = mount(srv.url("late-moov.mp4"))
    out = subprocess.run(["ffprobe", "-v", "error", "-show_format", "-show_streams", str(m.path("late-moov.mp4"))],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    recs = srv.wait_idle(WAIT)
    # Before: HEAD, the first 128 KiB, the moov in two parts, the bytes after the first read.
    assert len(recs) <= 2 and not any(r.method == "HEAD" for r in recs), describe(recs)
    assert recs[-1].range.endswith(f"-{len(srv.data('late-moov.mp4')) - 1}"), describe(recs)
    assert sum(r.bytes_sent for r in recs) <= 1 * MiB, describe(recs)


def probe_cold(mount, srv, path, content_type):
    """20 s of 720p H.264 encoded by ffmpeg into `path` (its container by
    the name), served, mounted cold and ffprobed: its bytes, the mount and
    what the server was asked."""
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc2=size=1280x720:rate=30", "-t", "20", "-c:v", "libx264", "-preset", "ultrafast",
                    "-g", "60", str(path)], check=True, timeout=120)
    data = path.read_bytes()
    srv.add(path.name, data, content_type=content_type)
    m = mount(srv.url(path.name))
    out = subprocess.run(["ffprobe", "-v", "error", "-show_format", "-show_streams", str(m.path(path.name))],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "codec_name=h264" in out.stdout, out.stdout
    return data, m, srv.wait_idle(WAIT)


def test_a_cold_ffprobe_of_an_mpeg_ts_reads_on_in_few_requests(mount, srv, tmp_path):
    """ffprobe (a scanner: its handle has no kernel readahead) reads a TS's
    head 32 KiB at a time, then its tail for the duration. The head's
    sync bytes tell the lookahead to fetch the tail at once, and the scan,
    reading on exactly, gets one long transfer: 3 requests (8 with a fetch
    of half its run at each miss, 139 with a request a read). The ceiling
    is that count: one request more fails it."""
    data, m, recs = probe_cold(mount, srv, tmp_path / "probe.ts", "video/mp2t")
    stats = json.loads(xget(m.mountpoint, "stats"))
    served = stats["scan_bytes_served"]
    kept = stats["scan_bytes_fetched"] + stats["play_bytes_fetched"]
    sent = sum(r.bytes_sent for r in recs)
    print(f"ffprobe of a {len(data)} byte TS: {len(recs)} requests, {sent} bytes sent, {kept} kept, {served} read")
    assert len(recs) <= 3, describe(recs)
    # From the page that holds where ffmpeg's duration estimate reads.
    assert recs[1].range == f"bytes={(len(data) - 250_000) // 4096 * 4096}-{len(data) - 1}", describe(recs)
    # Kept: what was read, half as much held ahead, the lookup's first
    # 512 KiB and the tail. The server may send more of the long transfer
    # (loopback's socket buffers take megabytes past its hold): 8 MiB a
    # request at most.
    assert kept <= served * 3 // 2 + PROBE_BYTES + 250_000 + 4096, stats
    assert sent <= PROBE_BYTES + 250_000 + 4096 + 8 * MiB, describe(recs)


def test_a_cold_ffprobe_of_a_matroska_file_takes_the_lookups_request_and_the_lookaheads(mount, srv, tmp_path):
    """ffprobe of a Matroska file (SeekHead at the start, Cues at the end,
    as ffmpeg writes them) reads its head: the lookup's first bytes hold
    it. The SeekHead points at the Cues, which the lookahead fetches in the
    next round trip, from the page that holds their start, so that a seek
    finds them cached. One request more fails this."""
    data, m, recs = probe_cold(mount, srv, tmp_path / "probe.mkv", "video/x-matroska")
    assert data[:4] == b"\x1a\x45\xdf\xa3" and len(data) > 4 * PROBE_BYTES
    cues = data.rfind(b"\x1c\x53\xbb\x6b")
    assert cues > PROBE_BYTES
    assert recs[0].range == f"bytes=0-{PROBE_BYTES - 1}", describe(recs)
    # ffprobe may close before the lookahead's answer: then it is stopped.
    assert [r.range for r in recs[1:]] in ([], [f"bytes={cues // 4096 * 4096}-{len(data) - 1}"]), describe(recs)
