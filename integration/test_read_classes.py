"""Read classes: a process named like a library scanner (ffprobe, and a test
program run under that name: the kernel's `comm` is the executable's name)
reads as a `scan`, anything else as `play`. A scan's reads wait behind a
player's for the origin's connections, get no readahead, and live in a cache
budget of their own that never pushes out what a player fetched. Every
assertion counts what the server saw (order, ranges, bytes), never the
clock."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from harness import data_of, gets, in_thread, mount_listed, pread_direct, stop_popen, wait_until, xget

KiB, MiB = 1024, 1024 * 1024
SERVER_WAIT = 30.0
SCAN_PLACES = 6   # an origin's 8 places less the 2 kept for players' reads

# Reads (path, offset, size) jobs with O_DIRECT, each on its own handle and
# thread (or one after another on one handle: "seq"), and prints the bytes'
# hex digests, so the test checks them.
SCANNER = textwrap.dedent("""
    import hashlib, mmap, os, sys, threading
    mode, jobs = sys.argv[1], [j.split(":") for j in sys.argv[2:]]
    out = [None] * len(jobs)
    def read(fd, offset, size):
        buf = mmap.mmap(-1, size)
        try:
            n = os.preadv(fd, [buf], offset)
            return bytes(buf[:n])
        finally:
            buf.close()
    def one(i, path, offset, size):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            out[i] = hashlib.sha256(read(fd, int(offset), int(size))).hexdigest()
        finally:
            os.close(fd)
    if mode == "plain":
        # One handle, plain preads (no O_DIRECT): what a probe does.
        fd = os.open(jobs[0][0], os.O_RDONLY)
        h = hashlib.sha256()
        for path, offset, size in jobs:
            h.update(os.pread(fd, int(size), int(offset)))
        os.close(fd)
        print(h.hexdigest())
    elif mode == "seq":
        path, offset, size, count = jobs[0]
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        h = hashlib.sha256()
        for k in range(int(count)):
            h.update(read(fd, int(offset) + k * int(size), int(size)))
        os.close(fd)
        print(h.hexdigest())
    else:
        threads = [threading.Thread(target=one, args=(i, *job)) for i, job in enumerate(jobs)]
        for t in threads: t.start()
        for t in threads: t.join()
        print("\\n".join(out))
""")


@pytest.fixture
def scanner(tmp_path):
    """scanner(mode, jobs) -> Popen of the test program under the name
    `ffprobe` (a symlink to the interpreter: comm is the link's name)."""
    script = tmp_path / "scanner.py"
    script.write_text(SCANNER)
    link = tmp_path / "ffprobe"
    os.symlink(os.path.realpath(sys.executable), link)
    started = []

    def start(mode, jobs):
        proc = subprocess.Popen([str(link), str(script), mode, *[f"{p}:{o}:{s}" for p, o, s in jobs]],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        stop_popen(proc)


def sha(data):
    import hashlib
    return hashlib.sha256(data).hexdigest()


def stats(m):
    return json.loads(xget(m.mountpoint, "stats"))


def count_gets(records):
    return sum(1 for r in records if r.method == "GET")


def describe(records):
    return "\n".join(f"  {r.method} {r.name} {r.range} status={r.status} sent={r.bytes_sent}"
                     for r in records) or "  (no requests)"


def test_a_players_reads_are_admitted_ahead_of_a_scans_waiting_reads(mount, srv, scanner):
    """Twelve reads of a scanner (twelve files) on a held origin: six run
    (two places stay for players), six wait. Then four reads of a player:
    two start at once, and the other two take the next places that free,
    ahead of every waiting read of the scan. The per-class counters agree
    with the bytes the server sent for each file."""
    piece = 64 * KiB
    scans = [f"s{i}.bin" for i in range(12)]
    data = {name: data_of(2 * MiB, 50 + i) for i, name in enumerate(scans)}
    data["film.bin"] = data_of(8 * MiB, 99)
    for name, body in data.items():
        srv.add(name, body)
    m = mount(*[srv.url(n) for n in data], extra=("--timeout", "60"))
    # Listed, then stat'ed: HEAD probes, not a lookup's GET of first bytes.
    assert sorted(os.listdir(m.mountpoint)) == sorted(data)
    for name, body in data.items():
        assert os.stat(m.path(name)).st_size == len(body)
    srv.wait_idle(SERVER_WAIT)
    srv.clear_log()

    # Every GET waits at the server until the test lets it go, so the order
    # of free places is the test's, not a clock's.
    for name in data:
        srv.set_fault(name, "hold")
    scan = scanner("par", [(m.path(n), 0, piece) for n in scans])
    srv.wait_for(lambda rs: count_gets(rs) >= SCAN_PLACES, SERVER_WAIT)
    wait_until(lambda: stats(m)["transfers_in_flight"] >= len(scans), "every scan read to ask for its bytes")
    assert count_gets(srv.requests) == SCAN_PLACES, describe(srv.requests)
    # Not at 0: a player's first read there asks for the head a lookup
    # would have brought (decision 0058), and these reads race for first.
    film_offsets = [k * MiB for k in range(1, 5)]
    joins = [in_thread(lambda o=o: pread_direct(m.path("film.bin"), o, piece)) for o in film_offsets]
    srv.wait_for(lambda rs: count_gets(rs) >= SCAN_PLACES + 2, SERVER_WAIT)
    wait_until(lambda: stats(m)["transfers_in_flight"] >= len(scans) + len(film_offsets),
               "every film read to ask for its bytes")
    assert count_gets(srv.requests) == SCAN_PLACES + 2, describe(srv.requests)
    # Every place is taken, and six scan reads and two film reads wait. Two
    # scan reads end, one after the other: each place must go to a film read.
    running = [r.name for r in gets(srv) if r.name != "film.bin"]
    for k, name in enumerate(running[:2]):
        srv.release(name)
        srv.wait_for(lambda rs, k=k: count_gets(rs) >= SCAN_PLACES + 3 + k, SERVER_WAIT)
    for name in data:
        srv.release(name)
    for join, offset in zip(joins, film_offsets):
        assert join() == data["film.bin"][offset:offset + piece]
    out, err = scan.communicate(timeout=120)
    assert scan.returncode == 0, err
    assert out.split() == [sha(data[n][:piece]) for n in scans]

    order = [r.name for r in gets(srv)]
    assert sorted(order) == sorted(scans + ["film.bin"] * 4), describe(srv.requests)
    seventh_scan = [i for i, name in enumerate(order) if name != "film.bin"][SCAN_PLACES]
    films = [i for i, name in enumerate(order) if name == "film.bin"]
    assert max(films) < seventh_scan, (
        f"a player's read came after a waiting scan's (order {order})\n{describe(srv.requests)}")
    assert all(n != "film.bin" for n in order[:SCAN_PLACES]), order

    # Seen, not guessed: the counters against what the server sent.
    srv.wait_idle(SERVER_WAIT)
    sent_scan = sum(r.bytes_sent for r in gets(srv) if r.name != "film.bin")
    sent_play = sum(r.bytes_sent for r in gets(srv, "film.bin"))
    s = stats(m)
    assert (s["scan_bytes_fetched"], s["play_bytes_fetched"]) == (sent_scan, sent_play) == \
        (len(scans) * piece, len(film_offsets) * piece), s
    assert (s["scan_bytes_served"], s["play_bytes_served"]) == (len(scans) * piece, len(film_offsets) * piece), s
    # The six that waited while the film's reads started, not the six that started at once.
    assert s["scan_reads_delayed"] == len(scans) - SCAN_PLACES, s


def test_a_scans_plain_reads_fetch_what_they_read_and_no_kernel_readahead(mount, srv, scanner):
    """A scanner's plain preads of 4 KiB at four places: the server sends
    those 16 KiB and no more (its handle is direct I/O: the kernel reads
    nothing around them). A player's same reads bring the kernel's
    readahead with them."""
    size, piece = 16 * MiB, 4 * KiB
    offsets = [0, MiB, 5 * MiB, 9 * MiB]
    scanned, played = data_of(size, 11), data_of(size, 12)
    m = mount_listed(mount, srv, {"scanned.bin": scanned, "played.bin": played}, extra=("--no-passthrough",))

    scan = scanner("plain", [(m.path("scanned.bin"), o, piece) for o in offsets])
    out, err = scan.communicate(timeout=120)
    assert scan.returncode == 0, err
    assert out.strip() == sha(b"".join(scanned[o:o + piece] for o in offsets))
    fd = os.open(m.path("played.bin"), os.O_RDONLY)
    try:
        assert b"".join(os.pread(fd, piece, o) for o in offsets) == b"".join(played[o:o + piece] for o in offsets)
    finally:
        os.close(fd)
    srv.wait_idle(SERVER_WAIT)
    sent_scan = sum(r.bytes_sent for r in gets(srv, "scanned.bin"))
    sent_play = sum(r.bytes_sent for r in gets(srv, "played.bin"))
    assert sent_scan == len(offsets) * piece, describe(srv.requests)
    assert sent_play > len(offsets) * piece, describe(srv.requests)


def test_a_scan_reading_on_fetches_half_its_run_ahead_and_a_player_a_window(mount, srv, scanner):
    """The same 8 MiB read in 1 MiB preads on one handle: a scanner that
    reads on fetches, with each read that misses, half of what it has read
    in a row (a demuxer's reads cost log1.5 round trips, not one each: 141
    GETs for ffprobe of a TS before), and at most half more than it reads;
    a player's earn a readahead window (and so fewer, longer GETs)."""
    size = 32 * MiB
    scanned, played = data_of(size, 7), data_of(size, 8)
    srv.add("scanned.bin", scanned)
    srv.add("played.bin", played)
    m = mount(srv.url("scanned.bin"), srv.url("played.bin"))
    assert sorted(os.listdir(m.mountpoint)) == ["played.bin", "scanned.bin"]
    assert os.stat(m.path("scanned.bin")).st_size == os.stat(m.path("played.bin")).st_size == size
    srv.wait_idle(SERVER_WAIT)
    srv.clear_log()

    reads = 8
    scan = scanner("seq", [(m.path("scanned.bin"), 0, f"{MiB}:{reads}")])
    out, err = scan.communicate(timeout=120)
    assert scan.returncode == 0, err
    assert out.strip() == sha(scanned[:reads * MiB])
    fd = os.open(m.path("played.bin"), os.O_RDONLY | os.O_DIRECT)
    try:
        import mmap
        got = b""
        for k in range(reads):
            buf = mmap.mmap(-1, MiB)
            n = os.preadv(fd, [buf], k * MiB)
            got += bytes(buf[:n])
            buf.close()
    finally:
        os.close(fd)
    assert got == played[:reads * MiB]
    srv.wait_idle(SERVER_WAIT)

    def ranges(name):
        return [tuple(int(x) for x in r.range.split("=")[1].split("-")) for r in gets(srv, name)]

    # The first read fetches itself; each later miss half the run more.
    scan_gets = ranges("scanned.bin")
    assert scan_gets[0] == (0, MiB - 1), describe(srv.requests)
    assert len(scan_gets) <= 4, describe(srv.requests)
    fetched = sum(end + 1 - start for start, end in scan_gets)
    assert fetched <= reads * MiB * 3 // 2, describe(srv.requests)
    # The player's window grew past its reads once it had read 4 MiB in a row.
    assert max(end + 1 - start for start, end in ranges("played.bin")) > MiB, describe(srv.requests)
    assert len(ranges("played.bin")) < reads, describe(srv.requests)
    sent = sum(r.bytes_sent for r in gets(srv, "scanned.bin"))
    assert reads * MiB <= sent <= reads * MiB * 3 // 2, describe(srv.requests)


def test_a_scan_that_stops_just_past_a_piece_had_no_more_sent_than_it_read(mount, srv, scanner):
    """A scanner's 32 KiB reads from the start, through the lookup's first
    512 KiB and 64 KiB past them, then its close: its long transfer past
    the head asked for its run and its read once more (576 KiB), so what it
    left sent unread is at most what it read: 1,088 KiB sent for 576 KiB
    read. Before, four windows (a window: its read and half its run):
    1,728 KiB sent, when a scan stopped just past a piece (the bench's 200-file Jellyfin scan had
    1.83× what it read sent)."""
    size = 32 * MiB
    data = data_of(size, 11)
    srv.add("clip.bin", data)
    m = mount(srv.url("clip.bin"))
    assert os.stat(m.path("clip.bin")).st_size == size
    srv.wait_idle(SERVER_WAIT)
    head = sum(r.bytes_sent for r in gets(srv, "clip.bin"))
    assert head == 512 * KiB, describe(srv.requests)
    reads = 18
    scan = scanner("seq", [(m.path("clip.bin"), 0, f"{32 * KiB}:{reads}")])
    out, err = scan.communicate(timeout=120)
    assert scan.returncode == 0, err
    assert out.strip() == sha(data[:reads * 32 * KiB])
    srv.wait_idle(SERVER_WAIT)
    sent = sum(r.bytes_sent for r in gets(srv, "clip.bin"))
    print(f"{sent} B sent for {reads * 32 * KiB} B read\n" + describe(srv.requests))
    assert sent <= 2 * reads * 32 * KiB, f"{sent} B sent for {reads * 32 * KiB} B read\n" + describe(srv.requests)


@pytest.fixture(scope="module")
def media_file(tmp_path_factory):
    """A real ~2 MB video (Matroska, 4 s of a test pattern at 4 Mbit/s) for ffprobe."""
    path = tmp_path_factory.mktemp("media") / "clip.mkv"
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=640x480:rate=25",
                    "-t", "4", "-c:v", "mpeg4", "-b:v", "4000k", "-minrate", "4000k", "-maxrate", "4000k",
                    "-bufsize", "1000k", "-y", str(path)], check=True, timeout=120)
    return path.read_bytes()


JELLYFIN_PROBE = ["ffprobe", "-analyzeduration", "200M", "-probesize", "1G", "-threads", "0", "-v", "warning",
                  "-print_format", "json", "-show_streams", "-show_chapters", "-show_format", "-i"]


def mount_played_film(mount, srv, clip, count, seed, extra):
    """A 12 MiB film and `count` copies of `clip` (ep00.mkv, ...) served and
    mounted with `extra`; the film read through by cat. Returns (mount,
    film data, names)."""
    film = data_of(12 * MiB, seed)
    srv.add("film.bin", film)
    names = [f"ep{i:02}.mkv" for i in range(count)]
    for name in names:
        srv.add(name, clip, content_type="video/x-matroska")
    m = mount(srv.url("film.bin"), *[srv.url(n) for n in names], extra=(*extra, "--no-passthrough"))
    subprocess.run(["cat", m.path("film.bin")], stdout=subprocess.DEVNULL, check=True, timeout=120)
    return m, film, names


def play_film_then_scan(mount, srv, media_file, extra):
    """A 12 MiB film read through by cat, then Jellyfin's probe of 48 other
    files under a 24 MiB cache: ffprobe reads about 560 KB of each (the
    streams' parameters are known early), 26 MB in all, more than twice
    the room left beside the film. Returns (mount, film data)."""
    m, film, names = mount_played_film(mount, srv, media_file, 48, 3, ("--cache-max-size", "24M", *extra))
    assert int(xget(m.path("film.bin"), "cached_bytes")) == len(film)
    for name in names:
        probe = subprocess.run([*JELLYFIN_PROBE, m.path(name)], capture_output=True, text=True, timeout=120)
        assert probe.returncode == 0, probe.stderr
        assert json.loads(probe.stdout)["streams"][0]["codec_name"] == "mpeg4"
    scanned = sum(r.bytes_sent for r in gets(srv) if r.name != "film.bin")
    assert scanned >= 20 * MiB, "the scan must bring more than the cache holds beside the film"
    # A pass of the evictor after the last probe.
    wait_until(lambda: stats(m)["cached_bytes"] <= 24 * MiB, "the cache back under its limit", timeout=30)
    srv.wait_idle(SERVER_WAIT)
    srv.clear_log()
    return m, film


def test_a_scan_of_many_files_leaves_every_byte_of_a_played_film_cached(mount, srv, media_file):
    m, film = play_film_then_scan(mount, srv, media_file, extra=())
    s = stats(m)
    # A lookup's first 512 KiB count as a scan's until a player reads them.
    assert s["scan_bytes_fetched"] >= 20 * MiB and s["play_bytes_fetched"] >= len(film) - 512 * KiB, s
    assert s["scan_bytes_fetched"] + s["play_bytes_fetched"] == s["bytes_from_network"], s
    assert int(xget(m.path("film.bin"), "cached_bytes")) == len(film)
    print(f"scan fetched {s['scan_bytes_fetched']}, film cached {len(film)} of {len(film)}")
    # What the server sees when the film is read again (past the page cache): nothing.
    for offset in range(0, len(film), 4 * MiB):
        assert pread_direct(m.path("film.bin"), offset, 4 * MiB) == film[offset:offset + 4 * MiB]
    assert gets(srv, "film.bin") == [], describe(srv.requests)


def test_without_read_classes_the_same_scan_evicts_the_film(mount, srv, media_file):
    """The control: `--scanners =` names no scanner, every read plays, and
    least recently used goes first: the film."""
    m, film = play_film_then_scan(mount, srv, media_file, extra=("--scanners", "="))
    assert stats(m)["scan_bytes_fetched"] == 0
    print(f"film cached after the scan without read classes: {xget(m.path('film.bin'), 'cached_bytes')} "
          f"of {len(film)}")
    assert int(xget(m.path("film.bin"), "cached_bytes")) < len(film)
    assert pread_direct(m.path("film.bin"), 0, 4 * MiB) == film[:4 * MiB]
    assert gets(srv, "film.bin"), "evicted bytes come from the server again"


@pytest.fixture(scope="module")
def long_clip(tmp_path_factory):
    """A real ~8 MB video (Matroska, 16 s at 4 Mbit/s): bigger than its two
    probe ranges (2 MiB at each end), so a thumbnail at its middle lies
    between them."""
    path = tmp_path_factory.mktemp("media") / "long.mkv"
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=640x480:rate=25",
                    "-t", "16", "-c:v", "mpeg4", "-b:v", "4000k", "-minrate", "4000k", "-maxrate", "4000k",
                    "-bufsize", "1000k", "-y", str(path)], check=True, timeout=120)
    return path.read_bytes()


def start_of(range_header):
    """The first byte of a `bytes=a-b` or `bytes=a-` request."""
    return int(range_header.split("=", 1)[1].split("-", 1)[0])


def thumbnail(path, out):
    """Jellyfin's image extraction, a plain ffmpeg told by its `-vframes 1`, at the middle."""
    return ["ffmpeg", "-nostdin", "-ss", "00:00:08.000", "-i", path, "-threads", "0", "-v", "error",
            "-vframes", "1", "-vf", "thumbnail=n=24", "-f", "image2", "-y", out]


def test_a_thumbnail_extraction_is_a_scan_and_a_rescan_finds_every_probe_range_cached(mount, srv, long_clip,
                                                                                        tmp_path):
    """A film played, then Jellyfin's probe and image extraction (ffmpeg
    `-vframes 1`, a plain ffmpeg like a player's) of 12 files under a scan
    budget that holds their probes but not their thumbnails' bytes too.
    The extraction's bytes are a scan's: the film stays whole. The budget
    frees the thumbnails' bytes between each file's probe ranges before it
    evicts any file whole, so a rescan of the unchanged files (the probe
    alone; scans' handles bypass the page cache) sends no request."""
    m, film, names = mount_played_film(mount, srv, long_clip, 12, 5,
                                       ("--cache-max-size", "64M", "--scan-cache-size", "10M"))
    assert int(xget(m.path("film.bin"), "cached_bytes")) == len(film)
    span = 2 * MiB
    middle = range(span, len(long_clip) - span)
    for name in names:
        probe = subprocess.run([*JELLYFIN_PROBE, m.path(name)], capture_output=True, text=True, timeout=120)
        assert probe.returncode == 0, probe.stderr
        out = str(tmp_path / f"{name}.jpg")
        thumb = subprocess.run(thumbnail(m.path(name), out), capture_output=True, text=True, timeout=120)
        assert thumb.returncode == 0, thumb.stderr
        assert os.path.getsize(out) > 0
    first = [r for r in gets(srv) if r.name != "film.bin"]
    in_middle = {r.name for r in first if r.range and start_of(r.range) in middle}
    assert in_middle == set(names), "every thumbnail read the file's middle:\n" + describe(first)
    s = stats(m)
    assert s["play_bytes_fetched"] <= len(film) + 512 * KiB, f"the extractions read as scans: {s}"
    # A scan that found its budget full had the evictor's pass at once: no
    # read waited for room until its deadline (the flusher ran passes for
    # players' pressure only, and each such read waited 2 s).
    assert s["room_waits_unanswered"] == 0, s
    scanned = sum(r.bytes_sent for r in first)
    assert scanned > 10 * MiB, f"the scan must bring more than its budget: {scanned}"
    # The scan budget's pass after the last extraction (its bytes, and the metadata's blocks).
    wait_until(lambda: stats(m)["cached_bytes"] <= len(film) + 10 * MiB, "the scan budget applied", timeout=30)
    assert int(xget(m.path("film.bin"), "cached_bytes")) == len(film), "the film stays whole"
    srv.wait_idle(SERVER_WAIT)
    srv.clear_log()
    for name in names:
        probe = subprocess.run([*JELLYFIN_PROBE, m.path(name)], capture_output=True, text=True, timeout=120)
        assert probe.returncode == 0, probe.stderr
    assert [r for r in srv.requests if r.method == "GET"] == [], "the rescan fetched:\n" + describe(srv.requests)
    print(f"scan fetched {scanned} for 12 files; rescan: 0 requests; film {len(film)} of {len(film)} cached")


def test_a_scan_past_its_full_budget_has_the_evictors_pass_at_once_and_sends_no_more_requests(mount, srv,
                                                                                              media_file):
    """40 Jellyfin probes under a scan budget (512 KiB) that the first few
    fill. A scan that finds no room presses the scan budget alone; the
    flusher ran passes for players' pressure only, so each such read waited
    for room until its deadline (2 s): 25 s for what takes 3 s with room,
    with 9 of those waits. Counted, not timed: no wait for room may end
    with no pass, and the probes send one GET a file, as with room, and
    the container lookahead one more (the Cues at the end, in the same
    round trip)."""
    names = {f"ep{i:02d}.mkv": media_file for i in range(40)}
    m = mount_listed(mount, srv, names, extra=("--cache-max-size", "4M"))
    for name in names:
        probe = subprocess.run([*JELLYFIN_PROBE, m.path(name)], capture_output=True, text=True, timeout=120)
        assert probe.returncode == 0, probe.stderr
    srv.wait_idle(SERVER_WAIT)
    s = stats(m)
    assert s["scan_bytes_fetched"] > 512 * KiB, f"the scans must fill their budget: {s}"
    assert s["limit_passes"] > 1, s
    assert s["room_waits_unanswered"] == 0, s
    assert s["lookahead_requests"] <= len(names), s
    assert count_gets(srv.requests) <= len(names) + s["lookahead_requests"] + 2, describe(srv.requests)
    print(f"40 probes past a full scan budget: {count_gets(srv.requests)} GETs "
          f"({s['lookahead_requests']} of the lookahead), {s['limit_passes']} passes")


def test_a_rescan_of_a_library_larger_than_the_scan_budget_finds_what_the_scan_left(mount, srv, scanner):
    """A scan reads the head of 24 files, one after another, under a scan
    budget that holds the probe ranges of a third of them; then the same
    scan again, in the same order. Evicting the least recently scanned file
    first took, at each miss of the rescan, the file it asked for next: it
    missed every file. Within the scan budget the most recently used file
    goes first, so the rescan finds what the first scan left, less the one
    or two its misses evict. A file keeps what its probe read (whole pages),
    not the lookup's first 512 KiB: counted by the files the server was
    asked for again and by the bytes each keeps."""
    count, probe = 24, 192 * KiB
    files = {f"ep{i:02d}.bin": data_of(MiB, 900 + i) for i in range(count)}
    for name, data in files.items():
        srv.add(name, data)
    m = mount(*[srv.url(n) for n in files], extra=("--cache-max-size", "64M", "--scan-cache-size", "2M"))

    def scan():
        for name, data in files.items():
            proc = scanner("plain", [(m.path(name), 0, probe)])
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            assert out.strip() == sha(data[:probe]), name
            srv.wait_idle(SERVER_WAIT)
            # The budget applied before the next probe: the order of the
            # scan, not the flusher's timing, decides what is kept.
            wait_until(lambda: stats(m)["cached_bytes"] <= 3 * MiB, "the scan budget applied", timeout=30)

    scan()
    kept = {n: int(xget(m.path(n), "cached_bytes")) for n in files}
    left = [n for n, b in kept.items() if b > 0]
    srv.wait_idle(SERVER_WAIT)
    srv.clear_log()
    scan()
    refetched = sorted({r.name for r in srv.requests if r.method == "GET"})
    hits = count - len(refetched)
    print(f"rescan of {count} files: the scan left {len(left)} ({sum(kept.values())} bytes), "
          f"the rescan found {hits}, fetched {len(refetched)} again")
    assert len(left) >= count // 4, kept
    # Kept: what the probe read; one file, the last, may not be trimmed yet.
    assert sum(kept.values()) <= len(left) * probe * 11 // 10 + 512 * KiB, kept
    assert hits >= len(left) - 2, f"the scan left {left}; the rescan fetched:\n{describe(srv.requests)}"
