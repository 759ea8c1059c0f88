"""Background jobs: a media server's jobs no one watches (subtitle
extraction, trickplay, loudness, intro fingerprints) read as `background`,
its library probe and frame grabs as `scan`, a viewer's stream and a file's
fonts as `play`: run as the real ffmpeg and ffprobe command lines Jellyfin
starts, as children of a process named `jellyfin`, through the mount. A
daily budget stops background fetches and nothing else, and survives a
remount. Every assertion counts bytes (the server's log, the readers'
accounts), never the clock."""

import hashlib
import json
import os
import subprocess
import sys
import textwrap

import pytest

from harness import mediafs, mount_listed, stop_popen, wait_until, xget

MiB = 1024 * 1024

# Started under the name `jellyfin` (a symlink to the interpreter: comm is
# the link's name): runs each job (an argv, as JSON) one after another as
# its child, printing each child's pid and exit status.
PARENT = textwrap.dedent("""
    import json, subprocess, sys
    for argv in json.loads(sys.argv[1]):
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(p.pid, p.wait(), flush=True)
""")


@pytest.fixture(scope="module")
def film(tmp_path_factory):
    """A Matroska file made by ffmpeg: 30 s of video and audio, a subtitle
    stream and a font attachment; about 4 MiB."""
    d = tmp_path_factory.mktemp("film")
    srt = d / "s.srt"
    srt.write_text("".join(f"{i + 1}\n00:00:{i:02d},000 --> 00:00:{i:02d},900\nline {i}\n\n" for i in range(25)))
    font = d / "font.ttf"
    font.write_bytes(os.urandom(20_000))
    out = d / "film.mkv"
    r = subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=640x360:rate=25",
                        "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-i", str(srt),
                        "-t", "30", "-map", "0:v", "-map", "1:a", "-map", "2:s",
                        "-c:v", "libx264", "-g", "50", "-b:v", "1M", "-c:a", "aac", "-c:s", "srt",
                        "-attach", str(font), "-metadata:s:t", "mimetype=font/ttf", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out.read_bytes()


@pytest.fixture
def jellyfin(tmp_path):
    """jellyfin(jobs) -> [(pid, status)]: the jobs run as children of a
    process named `jellyfin`."""
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    link = tmp_path / "jellyfin"
    os.symlink(os.path.realpath(sys.executable), link)

    def run(jobs):
        # In the test's directory, as Jellyfin runs them in its own: an
        # attachment dump writes its files (font.ttf) where it runs.
        proc = subprocess.Popen([str(link), str(script), json.dumps(jobs)], stdout=subprocess.PIPE, text=True,
                                cwd=tmp_path)
        try:
            out, _ = proc.communicate(timeout=300)
        finally:
            stop_popen(proc)
        assert proc.returncode == 0, out
        return [tuple(int(x) for x in line.split()) for line in out.splitlines()]
    return run


def readers(m):
    r = mediafs("status", m.mountpoint, "--readers", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["readers"]


def stats(m):
    return json.loads(xget(m.mountpoint, "stats"))


def test_jellyfins_jobs_through_the_mount_each_read_as_its_class(mount, srv, jellyfin, film, tmp_path):
    """Each of Jellyfin's command lines, run for real under a `jellyfin`
    parent, is listed with the class the man page gives it and its
    parent's name; the bytes fetched by class add up to what the server
    sent."""
    # Without passthrough: the probe caches the file whole, and the kernel
    # would serve the later jobs' reads itself, unseen by the daemon.
    m = mount_listed(mount, srv, {"film.mkv": film}, extra=["--no-passthrough"])
    src = f"file:{m.path('film.mkv')}"
    out = tmp_path / "out"
    out.mkdir()
    # The background jobs first: each file's bytes are fetched once, by
    # whoever reads them first, and the others read them from the cache.
    jobs = [
        (["ffmpeg", "-v", "error", "-i", src, "-copyts", "-map", "0:2", "-an", "-vn", "-c:s", "srt", "-y",
          str(out / "sub.srt")], "background"),
        (["ffmpeg", "-loglevel", "error", "-skip_frame", "nokey", "-threads", "1", "-i", src, "-an", "-sn",
          "-vf", "fps=0.1,scale=160:-1", "-c:v", "mjpeg", "-f", "image2", "-y", str(out / "%08d.jpg")], "background"),
        (["ffmpeg", "-hide_banner", "-v", "error", "-i", src, "-af", "ebur128=framelog=verbose", "-f", "null", "-"],
         "background"),
        (["ffmpeg", "-hide_banner", "-v", "error", "-ss", "0", "-i", src, "-to", "20", "-ac", "2",
          "-f", "chromaprint", "-fp_format", "raw", "-y", str(out / "fp.raw")], "background"),
        (["ffprobe", "-analyzeduration", "200M", "-probesize", "1G", "-i", src, "-threads", "0", "-v", "warning",
          "-print_format", "json", "-show_streams", "-show_chapters", "-show_format"], "scan"),
        (["ffmpeg", "-dump_attachment:t", "", "-y", "-i", src, "-t", "0", "-f", "null", "null"], "play"),
        (["ffmpeg", "-v", "error", "-ss", "00:00:04.800", "-i", src, "-threads", "0", "-vframes", "1",
          "-f", "image2", "-y", str(out / "primary.jpg")], "scan"),
        (["ffmpeg", "-v", "error", "-i", src, "-map", "0:0", "-map", "0:1", "-c", "copy", "-f", "matroska", "-y",
          str(out / "remux.mkv")], "play"),
    ]
    done = jellyfin([argv for argv, _ in jobs])
    assert [status for _, status in done] == [0] * len(jobs), done
    assert (out / "sub.srt").read_text().count("line ") == 25
    srv.wait_idle(30)
    wait_until(lambda: sum(1 for r in readers(m) if r["ended"] is not None) >= len(jobs),
               "every job's last close to reach the daemon")
    by_pid = {r["pid"]: r for r in readers(m)}
    for (argv, expected), (pid, _) in zip(jobs, done):
        row = by_pid.get(pid)
        assert row is not None, (argv, readers(m))
        assert (row["class"], row["parent"], row["process"]) == (expected, "jellyfin", argv[0]), (argv, row)
        assert row["bytes_read"] > 0, row
    s = stats(m)
    sent = sum(r.bytes_sent for r in srv.requests if r.method == "GET")
    assert s["play_bytes_fetched"] + s["scan_bytes_fetched"] + s["background_bytes_fetched"] == sent, (s, sent)
    assert s["background_bytes_fetched"] > 0 and s["background_bytes_served"] > 0, s
    assert sum(r["bytes_fetched"] for r in by_pid.values() if r["class"] == "background") \
        == s["background_bytes_fetched"], (readers(m), s)
    # The log names each background job once as it starts, with its rule.
    log = m.stderr()
    assert log.count("background reader: ffmpeg") == 4, log
    assert "subtitle extraction" in log and "loudness analysis" in log, log


def test_a_daily_budget_stops_background_fetches_only_and_survives_a_remount(mount, srv, jellyfin, film):
    """--background-daily 1M: a loudness job over a 4 MiB film fetches
    no more than 1 MiB (a read whose bytes would pass it fails at once),
    and fails; a player reads the whole film at the same time and after;
    the day's count is the same after a remount."""
    files = {"film.mkv": film, "other.mkv": film[::-1]}
    m = mount_listed(mount, srv, files, extra=["--background-daily", "1M"])
    done = jellyfin([["ffmpeg", "-hide_banner", "-v", "error", "-i", str(m.path("film.mkv")), "-af", "ebur128",
                      "-f", "null", "-"]])
    srv.wait_idle(30)
    s = stats(m)
    assert s["background_daily_limit"] == MiB, s
    background = s["background_bytes_fetched"]
    sent = sum(r.bytes_sent for r in srv.requests if r.method == "GET")
    # The rest is the mount's own (the container lookahead's tail), no job's:
    # a background transfer asks for no more than it counts, so the server
    # sent nothing no one received.
    assert s["play_bytes_fetched"] + s["scan_bytes_fetched"] + background == sent, (s, sent)
    # Never past the cap (bytes on their way count when asked for), and
    # near it: the job read until its next read no longer fit.
    assert MiB - 512 * 1024 <= background <= MiB, s
    assert s["background_daily_used"] == background, s
    assert "background bytes of today used up" in m.stderr(), m.stderr()
    assert m.stderr().count("background bytes of today used up") == 1, "logged once per process and file"
    del done
    # A player is never limited: both files whole, through the page cache.
    with open(m.path("other.mkv"), "rb") as f:
        assert f.read() == files["other.mkv"]
    with open(m.path("film.mkv"), "rb") as f:
        assert f.read() == film
    assert stats(m)["background_daily_used"] == background
    # The count is the cache directory's: a remount goes on from it.
    cache_dir = m.cache_dir
    assert m.unmount() == 0
    again = mount(*[srv.url(n) for n in files], extra=["--background-daily", "1M"], cache_dir=cache_dir)
    assert stats(again)["background_daily_used"] == background


def test_a_job_beside_a_player_reading_flat_out_is_slow_and_never_fails(mount, srv, film):
    """A player reads a 64 MiB file flat out from a server dripping it at
    1 MB/s: its transfer moves bytes for a minute. A loudness job started
    meanwhile waits for players at most a third of --timeout 6 (2 s) a
    transfer, then reads beside the player: it ends well, every byte of
    the film read. With no such bound its first read waited for the
    player's whole file and failed with EIO at 6 s."""
    big = os.urandom(64 * MiB)
    m = mount_listed(mount, srv, {"film.mkv": film, "big.bin": big}, extra=["--timeout", "6", "--no-passthrough"])
    srv.set_fault("big.bin", "drip", bytes_per_sec=1_000_000, chunk=64 * 1024)
    player = subprocess.Popen([sys.executable, "-c", "import sys, shutil; shutil.copyfileobj(open(sys.argv[1], 'rb'), "
                               "open('/dev/null', 'wb'), 1 << 20)", str(m.path("big.bin"))])
    try:
        wait_until(lambda: stats(m)["play_bytes_fetched"] >= MiB, "the player's bytes to flow")
        job = subprocess.run(["ffmpeg", "-hide_banner", "-nostdin", "-v", "error", "-i", str(m.path("film.mkv")),
                              "-af", "ebur128", "-f", "null", "-"], capture_output=True, text=True, timeout=120)
        # Still reading: the job read beside it all along.
        player_read_on = player.poll() is None
        s = stats(m)
    finally:
        stop_popen(player)
    assert job.returncode == 0 and job.stderr == "", job.stderr[-3000:] + m.stderr()[-3000:]
    assert player_read_on, f"the player ended before the job did: the two were not read together\n{s}"
    assert "did not arrive within" not in m.stderr(), m.stderr()[-3000:]
    (row,) = [r for r in readers(m) if r["process"] == "ffmpeg"]
    assert row["class"] == "background", row
    assert s["background_bytes_fetched"] >= len(film) // 2, s
