"""Round trips per workload, counted by the link emulator (bench/linkem.py
--requests-log, `rounds()`): a request sent after an answer of the current
wave reached mediafs may have waited on it, so it starts the next wave.
Through a 60 ms round trip, which dwarfs this machine's jitter, the count
does not depend on its speed; nothing here asserts a time.

Each ceiling is the best count measured (with the container lookahead and
a scan's long transfers) and no margin: one round trip more, one request
more, fails. What the previous design took is in each docstring. Each runs
under both link models; where slow start costs a round (the lookup's
512 KiB take five of its round trips, so a reader's first read past them
comes after the lookahead's answer: a wave of its own), the slow-start
ceiling says so (`slow_start_round`).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from conftest import made_once
from harness import index_html, xget

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import linkem  # noqa: E402

KiB, MiB = 1024, 1024 * 1024
LINKEM = Path(__file__).resolve().parent.parent / "bench" / "linkem.py"
DELAY_MS = 30          # each way: 60 ms a round trip
WAIT = 30.0


@pytest.fixture(params=["paced", "slowstart"])
def link(request, srv, tmp_path):
    """The emulator in front of the fault server, logging requests: yields
    (base URL, a function returning the requests so far). Under both of
    the bench's link models (decision 0050): paced, and TCP's slow start
    per connection with its restart after idle, where a design that opens
    fresh connections pays for each."""
    log = tmp_path / "requests.jsonl"
    model = ["--slow-start"] if request.param == "slowstart" else []
    proc = subprocess.Popen([sys.executable, str(LINKEM), "--upstream", f"127.0.0.1:{srv.port}",
                             "--delay-ms", str(DELAY_MS), "--rate-mbit", "200", "--lifetime", "600",
                             "--stdin-watch", "--requests-log", str(log), *model],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip().isdigit(), f"linkem printed {line!r}, rc={proc.poll()}"
        yield (f"http://127.0.0.1:{int(line)}/", lambda: linkem.read_requests(log) if log.exists() else [],
               request.param)
    finally:
        proc.terminate()
        harness.stop_popen(proc, timeout=5)


@pytest.fixture(scope="module")
def films():
    """60 s of 1280x720 H.264 with AAC, as ffmpeg writes it: an mp4 (moov
    after mdat), the same in Matroska (SeekHead first, Cues at the end) and
    in MPEG-TS. Encoded once for all workers (conftest.made_once)."""
    root = made_once("round-trip-films", make_films)
    out = {name: (root / name).read_bytes() for name in ("film.mp4", "film.mkv", "film.ts")}
    assert out["film.mp4"].find(b"moov") > out["film.mp4"].find(b"mdat") > 0, "ffmpeg wrote moov first"
    return out


def make_films(root):
    mp4 = root / "film.mp4"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y",
                    "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30:duration=60",
                    "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=60",
                    "-c:v", "libx264", "-preset", "ultrafast", "-g", "60", "-pix_fmt", "yuv420p",
                    "-c:a", "aac", "-shortest", str(mp4)], check=True, timeout=300)
    for ext in ("mkv", "ts"):
        subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(mp4), "-map", "0", "-c", "copy",
                        str(root / f"film.{ext}")], check=True, timeout=120)


TYPES = {"mp4": "video/mp4", "mkv": "video/x-matroska", "ts": "video/mp2t"}


def describe(requests):
    if not requests:
        return "  (no requests)"
    t0 = requests[0]["sent"]
    return "\n".join(f"  {r['sent'] - t0:7.3f} {'%7.3f' % (r['answered'] - t0) if r['answered'] else '   none'}"
                     f" {r['line'][:40]} {r['range']}" for r in requests)


def run_cold(mount, srv, link, films, name, argv, unmount=False):
    """`argv` (with {} for the file) on a cold mount of `name` through the
    link: the requests it sent, their rounds, the mount's stats. The
    requests are read once none is running: a player's long transfer is
    held after it stops for its grace and its hold (10 s); with `unmount`
    (a test that counts requests, not bytes fetched) the mount is
    stopped once the stats are read, which ends its transfers at once."""
    srv.add(name, films[name], content_type=TYPES[name.rsplit(".", 1)[1]])
    base, requests, _ = link
    m = mount(base + name)
    path = str(m.path(name))
    out = subprocess.run([a.replace("{}", path) for a in argv], capture_output=True, timeout=180)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
    if unmount:
        stats = json.loads(xget(m.mountpoint, "stats"))
        assert m.unmount() == 0, m.stderr()
    srv.wait_idle(WAIT)
    got = requests()
    if not unmount:
        stats = json.loads(xget(m.mountpoint, "stats"))
    print(f"{name} {argv[0]}: {len(got)} requests, {linkem.rounds(got)} rounds\n{describe(got)}")
    return got, linkem.rounds(got), stats


def slow_start_round(link, where):
    """1 when the link starts each connection slowly and the workload reads
    on past the lookup's head (`where`), else 0. Measured on Dec 6: ffprobe
    and Jellyfin's probe of the TS (the first 3 s of the mkv too, until a
    player's stream started at its first read); every other row's counts
    are the paced model's."""
    return 1 if link[2] == "slowstart" and where else 0


FFPROBE = ["ffprobe", "-v", "error", "-show_format", "-show_streams", "{}"]
JELLYFIN = ["ffprobe", "-v", "error", "-analyzeduration", "200M", "-probesize", "1G",
            "-show_streams", "-show_format", "{}"]
SEEK = ["ffmpeg", "-nostdin", "-v", "error", "-ss", "40", "-i", "{}", "-t", "1", "-f", "null", "-"]
FIRST3S = ["ffmpeg", "-nostdin", "-v", "error", "-i", "{}", "-t", "3", "-f", "null", "-"]


def test_the_link_emulator_counts_a_request_sent_after_an_answer_as_a_new_round():
    def r(sent, answered):
        return {"sent": sent, "answered": answered}
    assert linkem.rounds([]) == 0
    # Two at once, then one after the first answer, then one sent before that answer came.
    assert linkem.rounds([r(0, 1), r(0.01, 1.2), r(1.1, 2), r(1.5, 2.5)]) == 2
    assert linkem.rounds([r(0, 1), r(1.1, 2), r(2.1, None), r(3, 4)]) == 3


@pytest.mark.parametrize("ext", ["mp4", "mkv", "ts"])
def test_a_cold_ffprobe_takes_two_round_trips(mount, srv, link, films, ext):
    """The lookup's GET of the first 512 KiB, then, in one wave, what the
    container says the demuxer reads next (the mp4's moov, the mkv's Cues,
    the TS's tail) and, for a TS read on past its head, one long transfer.
    Before: mp4 2, mkv 1 (its Cues fetched at the first seek), TS 9 (a
    request each time ffprobe read past the last one's bytes)."""
    got, rounds, stats = run_cold(mount, srv, link, films, f"film.{ext}", FFPROBE)
    assert rounds <= 2 + slow_start_round(link, ext == "ts"), describe(got)
    assert len(got) <= {"mp4": 2, "mkv": 2, "ts": 3}[ext], describe(got)
    assert stats["lookahead_requests"] == 1, stats
    size = len(films[f"film.{ext}"])
    # The lookahead reached the end of the file: the index (moov, Cues) or the tail is there.
    assert any(r["range"] and r["range"].endswith(f"-{size - 1}") for r in got), describe(got)


def test_a_cold_jellyfin_probe_of_a_ts_reads_on_in_one_long_transfer_and_keeps_little_more(mount, srv, link, films):
    """Jellyfin's probe (-analyzeduration 200M -probesize 1G) of a TS reads
    far into it; a scan that reads on exactly has one long transfer, held
    half its run ahead, 8 MiB at a time: 23 rounds for 117 MB before."""
    got, rounds, stats = run_cold(mount, srv, link, films, "film.ts", JELLYFIN)
    served = stats["scan_bytes_served"] + stats["play_bytes_served"]
    fetched = stats["scan_bytes_fetched"] + stats["play_bytes_fetched"]
    size = len(films["film.ts"])
    pieces = -(-max(0, size - 512 * KiB) // (8 * MiB))
    assert rounds <= 1 + pieces + slow_start_round(link, True), describe(got)
    assert len(got) <= 2 + pieces, describe(got)
    # Kept: what was read, its hold, the lookup's head and the tail.
    assert fetched <= served * 3 // 2 + 512 * KiB + 256 * KiB, stats


@pytest.mark.parametrize("ext", ["mp4", "mkv"])
def test_a_cold_jellyfin_probe_of_an_indexed_file_has_little_sent_past_what_it_read(mount, srv, link, films, ext):
    """`ls -l` of a listing (sizes by HEAD, no first bytes), then Jellyfin's
    probe: its reads past the head become a scan's long transfer. A held
    transfer's server fills the line and the sockets' buffers past the
    hold whether the reader goes on or not (4 MiB on the emulator's line);
    a scan of an MP4 or a Matroska file stops soon after its index, so its
    long transfer asks for its run and its read once more, at least
    512 KiB, not 8 MiB. The ceiling: what the scan read, as much again,
    and 768 KiB (the first piece and the lookahead's index)."""
    name = f"film.{ext}"
    srv.add(f"lib/{name}", films[name], content_type=TYPES[ext])
    srv.add("lib/", index_html([name]).encode(), content_type="text/html")
    base, requests, _ = link
    m = mount(base + "lib/")
    assert [os.stat(m.path(n)).st_size for n in os.listdir(m.mountpoint)] == [len(films[name])]
    srv.wait_idle(WAIT)
    listed = len(requests())
    out = subprocess.run([a.replace("{}", str(m.path(name))) for a in JELLYFIN], capture_output=True, timeout=180)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
    srv.wait_idle(WAIT)
    got = requests()[listed:]
    stats = json.loads(xget(m.mountpoint, "stats"))
    served = stats["scan_bytes_served"]
    sent = srv.bytes_sent(f"lib/{name}")
    print(f"{name}: {sent} B sent for {served} B read, {len(got)} requests, {linkem.rounds(got)} rounds\n"
          + describe(got))
    assert served > 0, f"ffprobe's reads were not a scan's: {stats}"
    # The mp4: its head, its moov at the end, then the samples from its first
    # (the read there starts the long transfer; it was a round of its own,
    # 48 bytes, before the stream began at the read after it: 4 rounds).
    assert linkem.rounds(got) <= {"mp4": 3, "mkv": 2}[ext], describe(got)
    assert sent <= 2 * served + 768 * KiB, f"{sent} B sent for {served} B read\n" + describe(got)


@pytest.mark.parametrize("ext", ["mp4", "mkv"])
def test_a_cold_seek_takes_four_round_trips(mount, srv, link, films, ext):
    """ffmpeg -ss 40 on a cold mount: the lookup, the index (by the
    lookahead), the keyframe's cluster, then the player's long transfer
    once it reads on. No stream from the first read: ffmpeg's arguments
    say it starts at 40 s (decision 0059). With one (decision 0056, Dec
    7): 5 requests, the stream stopped by the seek after its server sent
    4-5 MB on the bench's WAN link."""
    got, rounds, stats = run_cold(mount, srv, link, films, f"film.{ext}", SEEK, unmount=True)
    assert rounds <= 4, describe(got)
    assert len(got) <= 4, describe(got)
    assert stats["streams_ahead"] == 0, stats


@pytest.mark.alone("the stream goes out with ffmpeg's first read, which beside other workers can come later "
                   "than the lookahead's answer one 60 ms round trip after the head: a round more (its read "
                   "past the head did, 1 run in 4 at 4 workers, when that read started the stream)")
@pytest.mark.parametrize("ext", ["mp4", "mkv"])
def test_the_first_three_seconds_take_two_round_trips(mount, srv, link, films, ext):
    """ffmpeg decoding the first 3 s: its lookup asks for the whole file,
    held after the head, the stream its reads let go on (decision 0061);
    then the index by the lookahead. Two requests in two rounds. Before
    0061: the head, then in one wave the index and the stream past the
    head on a connection of its own, started at the player's first read
    (decision 0056): 3 requests. Before 0056: an mp4's stream waited for
    its demuxer to read past the head, after the moov (3 rounds), and
    under slow start a Matroska file's too (the head's 512 KiB take five
    of its round trips)."""
    got, rounds, stats = run_cold(mount, srv, link, films, f"film.{ext}", FIRST3S, unmount=True)
    assert rounds <= 2, describe(got)
    assert len(got) <= 2, describe(got)
    assert got[0]["range"] == "bytes=0-", describe(got)
    assert stats["streams_ahead"] == 1, stats


def test_a_program_reading_the_first_4_kib_starts_no_stream(mount, srv, link, films):
    """`head -c 4096` of a cold file: the lookup's request and the
    lookahead's (the Cues, for any open handle), no stream. Its read
    (16 KiB, the kernel's first readahead for a 4 KiB read) is no
    player's: a stream started there would have its server fill the
    sockets' buffers (4.4 MB on the bench's WAN link) for nothing."""
    srv.add("film.mkv", films["film.mkv"], content_type=TYPES["mkv"])
    base, requests, _ = link
    m = mount(base + "film.mkv")
    with open(m.path("film.mkv"), "rb", buffering=0) as f:
        assert f.read(4096) == films["film.mkv"][:4096]
    stats = json.loads(xget(m.mountpoint, "stats"))
    assert m.unmount() == 0, m.stderr()
    got = requests()
    assert stats["streams_ahead"] == 0, stats
    starts = sorted(int(r["range"].split("=")[1].split("-")[0]) for r in got)
    # The lookup's at 0; the lookahead's, if any, past the middle (the Cues at the end).
    assert starts[0] == 0 and all(s > len(films["film.mkv"]) // 2 for s in starts[1:]), describe(got)


def test_a_sequential_read_takes_two_round_trips(mount, srv, link, films):
    """dd of the whole mkv: the lookup's head, then (with the lookahead's
    Cues) the long transfer the first read past the head becomes: 2 rounds
    in 3 requests. The head's first 128 KiB tell the link's rate, so that
    read, which comes while the head still runs, is sized to the link; it
    was a 128 KiB request of its own when only the head's end told it.
    The ceilings have a request and a round of margin (the kernel's reads
    past the head could come before the head's first bytes); a request a
    read (the design before) fails them."""
    got, rounds, stats = run_cold(mount, srv, link, films, "film.mkv",
                                  ["dd", "if={}", "of=/dev/null", "bs=1M", "status=none"], unmount=True)
    assert rounds <= 3, describe(got)
    assert len(got) <= 4, describe(got)


def listed_cold(mount, srv, link, films, ext):
    """The film in a listing through the link, mounted and `ls -l`ed
    (sizes by HEAD, no first bytes): (mount, name, bytes, requests)."""
    name = f"film.{ext}"
    data = films[name]
    srv.add(f"lib/{name}", data, content_type=TYPES[ext])
    srv.add("lib/", index_html([name]).encode(), content_type="text/html")
    base, requests, _ = link
    m = mount(base + "lib/")
    assert {n: os.stat(m.path(n)).st_size for n in os.listdir(m.mountpoint)} == {name: len(data)}
    srv.wait_idle(WAIT)
    return m, name, data, requests


@pytest.mark.parametrize("ext", ["mp4", "mkv"])
def test_a_seek_in_a_listed_file_whose_head_was_never_fetched_does_not_stream_up_to_it(mount, srv, link, films, ext):
    """`ls -l` of a listing (sizes by HEAD, no first bytes), then ffmpeg
    -ss 40: the player's reads of the head start a long transfer, held at
    its window; the seek's readahead has transfers of its own and never
    lets that held one go on to the seek. It did: the whole file up to
    40 s was sent first (87 MiB and 15 s of a 109 MiB film at 50 Mbit/s).
    Since decision 0059 ffmpeg's `-ss` starts no such transfer; the bound
    stands for a player that seeks by itself."""
    m, name, data, requests = listed_cold(mount, srv, link, films, ext)
    out = subprocess.run([a.replace("{}", str(m.path(name))) for a in SEEK], capture_output=True, timeout=180)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
    # What mediafs took in (the emulator between buffers what a held
    # transfer leaves, so the server's count says less of the reader).
    received = json.loads(xget(m.mountpoint, "stats"))["bytes_from_network"]
    assert received <= len(data) // 3, \
        f"{received} of {len(data)} bytes received for a seek to 40 s of 60\n{describe(requests())}"


@pytest.mark.parametrize("ext", ["mp4", "mkv"])
def test_the_first_three_seconds_of_a_listed_file_take_two_round_trips(mount, srv, link, films, ext):
    """`ls -l` of a listing (sizes by HEAD, no first bytes), then ffmpeg
    decoding the first 3 s: as a file a lookup stat'ed does
    (test_the_first_three_seconds_take_two_round_trips).
    The player's first read asks for the head a lookup would have
    brought; that head's answer tells the link far and starts the stream
    past the head, beside the lookahead's index (decision 0058). Before:
    each read past the last asked for its own bytes, the kernel's 64 to
    128 KiB a round trip, until the reads looked sequential (on Dec 7: 5
    requests in 4 rounds for the mp4, 5 in 3 for the mkv, paced; 6 in 4
    under slow start)."""
    m, name, data, requests = listed_cold(mount, srv, link, films, ext)
    before = len(requests())
    out = subprocess.run([a.replace("{}", str(m.path(name))) for a in FIRST3S], capture_output=True, timeout=180)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
    stats = json.loads(xget(m.mountpoint, "stats"))
    assert m.unmount() == 0, m.stderr()
    got = [r for r in requests()[before:] if "GET" in r["line"]]
    print(f"{name}: {len(got)} requests, {linkem.rounds(got)} rounds\n{describe(got)}")
    assert linkem.rounds(got) <= 2, describe(got)
    assert len(got) <= 3, describe(got)
    assert stats["streams_ahead"] == 1, stats


def zipped(name, data):
    """`data` as the one member `name` of a stored ZIP (Python's zipfile)."""
    import io
    import zipfile
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr(name, data)
    return out.getvalue()


@pytest.mark.parametrize("ext", ["mp4", "mkv"])
def test_a_cold_ffprobe_of_a_zip_member_takes_the_index_then_the_plain_files_rounds(mount, srv, link, films, ext):
    """An archive's URL as the source: the index (the ZIP's head, then its
    tail, where the central directory is; the member's local header is in
    the head), then ffprobe as on the plain file: the member's head, and
    the container's index in one more wave."""
    name = f"film.{ext}"
    srv.add("film.zip", zipped(name, films[name]), content_type="application/zip")
    base, requests, _ = link
    m = mount(base + "film.zip")
    assert os.listdir(m.mountpoint) == [name], m.stderr()
    srv.wait_idle(WAIT)
    indexed = len(requests())
    out = subprocess.run([a.replace("{}", str(m.path(name))) for a in FFPROBE], capture_output=True, timeout=180)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
    srv.wait_idle(WAIT)
    got = requests()
    print(f"zip {name}: {indexed} requests to index, {len(got) - indexed} to probe, "
          f"{linkem.rounds(got[:indexed])} + {linkem.rounds(got[indexed:])} rounds\n{describe(got)}")
    assert linkem.rounds(got[:indexed]) <= 2 and indexed <= 2, describe(got)
    assert linkem.rounds(got[indexed:]) <= 2, describe(got) + m.stderr()[-6000:]
    assert len(got) - indexed <= 2, describe(got) + m.stderr()[-6000:]


def test_a_sequential_read_of_a_rar_member_takes_one_request_a_volume_more_than_the_plain_file(
        mount, srv, link, films, tmp_path):
    """dd of the mkv stored in 5 RAR5 volumes (our writer; unar checks it
    in test_rar5write), its first volume's URL the source: after the index,
    the plain file's 3 requests (and its ceiling's one of margin), plus one
    request for each volume edge the player's long transfer crosses. It is
    held piece by piece as a plain file's is; unheld, it was a request every
    8 MiB window."""
    import rar5write
    data = films["film.mkv"]
    src = tmp_path / "film.mkv"
    src.write_bytes(data)
    (tmp_path / "set").mkdir()
    volumes = rar5write.write_rar5_volumes(src, "film.mkv", tmp_path / "set", "film", -(-len(data) // 5) + 4096)
    assert len(volumes) == 5
    for volume in volumes:
        srv.add(f"lib/{Path(volume).name}", Path(volume).read_bytes(), content_type="application/x-rar-compressed")
    srv.add("lib/", index_html([Path(v).name for v in volumes]).encode(), content_type="text/html")
    base, requests, _ = link
    m = mount(base + "lib/film.part1.rar")
    assert os.listdir(m.mountpoint) == ["film.mkv"], m.stderr()
    srv.wait_idle(WAIT)
    indexed = len(requests())
    out = subprocess.run(["dd", f"if={m.path('film.mkv')}", "of=/dev/null", "bs=1M", "status=none"],
                         capture_output=True, timeout=180)
    assert out.returncode == 0, out.stderr
    srv.wait_idle(WAIT)
    got = requests()[indexed:]
    print(f"rar member: {indexed} requests to index, {len(got)} to read, {linkem.rounds(got)} rounds\n{describe(got)}")
    # The directory's listing, then the index: every volume's head at once
    # and, for the last, its end block (the member ends past its head).
    assert indexed <= 2 + len(volumes) and linkem.rounds(requests()[:indexed]) <= 3, describe(requests())
    assert len(got) <= 4 + len(volumes) - 1, describe(got)
