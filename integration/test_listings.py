"""Listed directories after their first listing: `--dir-cache-time` says when
a listing is fetched again, in the background; `user.mediafs.refresh` on a
directory re-lists it now; while a refresh is under way, or the server is
down, lookups answer from the last listing and never wait on it.

The listing is served by an in-process FaultServer, which can stop or stall
it. Timeouts are hang guards only; where a test shows that a lookup did not
wait, it does so by order (the listing request still in flight when the
lookup has returned), not by a clock.
"""

import errno
import json
import os
import subprocess
import time

import pytest

from harness import data_of, guarded, index_html, mediafs, read_whole, xget, xset

WAIT = 30.0
MOUNT_ARGS = ["--timeout", "10"]


def serve_listing(srv, files):
    for name, data in files.items():
        srv.add(f"media/{name}", data)
    srv.add("media/", index_html(sorted(files)).encode(), content_type="text/html")


def stat_every_entry(m, files):
    """`ls -l` of the listed directory: every entry stats with its size."""
    for name in os.listdir(m.mountpoint):
        assert os.stat(m.path(name)).st_size == len(files[name])


def listed_once(mount, srv, files, cache):
    """Serves the files' listing, mounts it on `cache`, stats every entry
    and unmounts; returns the cache."""
    serve_listing(srv, files)
    m = mount(srv.url("media/"), extra=MOUNT_ARGS, cache_dir=cache)
    stat_every_entry(m, files)
    assert m.unmount() == 0
    return cache


def listing_gets(srv):
    return [r for r in srv.requests if r.method == "GET" and r.path == "/media/"]


def test_writing_refresh_on_a_directory_lists_it_again_at_once(mount, srv):
    files = {"a.bin": data_of(10_000, 1)}
    serve_listing(srv, files)
    m = mount(srv.url("media/"), extra=MOUNT_ARGS)
    assert sorted(os.listdir(m.mountpoint)) == ["a.bin"]
    assert "user.mediafs.refresh" in os.listxattr(m.mountpoint)
    files["b.bin"] = data_of(20_000, 2)
    serve_listing(srv, files)
    # Within the default 5 minutes, the old listing is believed.
    assert sorted(os.listdir(m.mountpoint)) == ["a.bin"]
    xset(m.mountpoint, "refresh", "1")
    assert sorted(os.listdir(m.mountpoint)) == ["a.bin", "b.bin"], m.stderr()
    assert read_whole(m.path("b.bin")) == files["b.bin"]
    assert xget(m.mountpoint, "refresh") == ""


def test_files_that_left_a_listing_leave_the_mount_and_an_open_one_reads_on(mount, srv):
    files = {f"f{i}.bin": data_of(10_000 + i, i) for i in range(5)}
    serve_listing(srv, files)
    m = mount(srv.url("media/"), extra=MOUNT_ARGS)
    assert len(os.listdir(m.mountpoint)) == 5
    entries = lambda: json.loads(xget(m.mountpoint, "stats"))["entries"]
    assert entries() == 5
    held = os.open(m.path("f0.bin"), os.O_RDONLY)
    try:
        serve_listing(srv, {"f4.bin": files["f4.bin"]})
        xset(m.mountpoint, "refresh", "1")
        assert os.listdir(m.mountpoint) == ["f4.bin"]
        assert entries() == 1, "loaders of files that left the listing are kept"
        # A handle opened before reads on; when the name returns it leads
        # to the same file, not a second one fighting over its cache.
        assert os.pread(held, 20_000, 0) == files["f0.bin"]
        serve_listing(srv, {"f0.bin": files["f0.bin"], "f4.bin": files["f4.bin"]})
        xset(m.mountpoint, "refresh", "1")
        assert sorted(os.listdir(m.mountpoint)) == ["f0.bin", "f4.bin"]
        assert xget(m.path("f0.bin"), "cached_bytes") == str(len(files["f0.bin"]))
        assert read_whole(m.path("f0.bin")) == files["f0.bin"]
    finally:
        os.close(held)


def test_ls_l_of_a_big_listing_probes_with_head_only_however_far_the_stats_run_ahead(mount, srv):
    # The background probes run a bounded number at a time; a stat that
    # overtakes them probes its entry itself, and must not fetch its first
    # bytes as a lone lookup's probe does: `ls -l` of a library is metadata.
    files = {f"f{i:04d}.bin": data_of(1000 + i, i) for i in range(1500)}
    serve_listing(srv, files)
    m = mount(srv.url("media/"), extra=MOUNT_ARGS)
    names = os.listdir(m.mountpoint)
    assert len(names) == len(files)
    # In reverse: a scanner's order need not be the listing's.
    for name in reversed(names):
        assert os.stat(m.path(name)).st_size == len(files[name])
    fetched = [r for r in srv.requests if r.method == "GET" and r.path != "/media/"]
    assert not fetched, f"{len(fetched)} GETs of files during ls -l, e.g. {fetched[0].path} {fetched[0].range}"


def test_ls_l_after_a_remount_gets_every_size_with_the_names_and_no_stat_reaches_the_daemon(mount, srv, tmp_path):
    # Known attributes travel with the names (readdirplus), so the kernel
    # answers each stat itself: `ls -l` of a big library is one pass, not
    # a round trip to the daemon per file.
    files = {f"f{i:04d}.bin": data_of(1000 + i, i) for i in range(600)}
    cache = listed_once(mount, srv, files, tmp_path / "cache-remount")
    m = mount(srv.url("media/"), extra=MOUNT_ARGS, cache_dir=cache)
    before = json.loads(xget(m.mountpoint, "stats"))["attribute_requests"]
    out = subprocess.run(["ls", "-l", m.mountpoint], capture_output=True, text=True, check=True).stdout
    sizes = {line.split()[-1]: int(line.split()[4]) for line in out.splitlines()[1:]}
    assert sizes == {name: len(data) for name, data in files.items()}
    asked = json.loads(xget(m.mountpoint, "stats"))["attribute_requests"] - before
    assert asked < len(files) // 10, f"{asked} stats of {len(files)} entries reached the daemon"


def test_a_remount_lists_from_the_saved_listing_before_any_request_then_refreshes_it(mount, srv, tmp_path):
    # The last listing is kept in the cache: a remount's `ls -l` is answered
    # from it while the listing request is still in flight (held back 3 s
    # here), and the refresh then brings the server's changes.
    files = {f"f{i:03d}.bin": data_of(3000 + i, i) for i in range(50)}
    cache = listed_once(mount, srv, files, tmp_path / "cache-saved")
    assert any((cache / "listings").iterdir()), "no listing was saved"
    srv.add("media/new.bin", data_of(777, 1))
    srv.add("media/", index_html(sorted(files) + ["new.bin"]).encode(), content_type="text/html")
    srv.set_fault("media/", "drip", delay=3)
    srv.clear_log()
    m = mount(srv.url("media/"), extra=MOUNT_ARGS, cache_dir=cache)
    out = guarded(lambda: subprocess.run(["ls", "-l", m.mountpoint], capture_output=True, text=True,
                                         check=True).stdout, what="ls -l")
    sizes = {line.split()[-1]: int(line.split()[4]) for line in out.splitlines()[1:]}
    assert sizes == {name: len(data) for name, data in files.items()}, "the saved listing was not served"
    finished = [r for r in srv.requests if r.done]
    assert finished == [], f"requests answered before the first ls -l did: {finished}"
    srv.wait_for(lambda rs: any(r.path == "/media/" and r.done for r in rs), timeout=WAIT)
    deadline = time.monotonic() + WAIT
    while "new.bin" not in os.listdir(m.mountpoint):
        assert time.monotonic() < deadline, "the refresh after the remount never showed the new file"
        time.sleep(0.2)
    assert os.stat(m.path("new.bin")).st_size == 777


def test_a_remount_with_the_server_down_lists_from_the_saved_listing(mount, srv, tmp_path):
    files = {"a.bin": data_of(11_000, 2), "b c.bin": data_of(12_000, 3)}
    cache = listed_once(mount, srv, files, tmp_path / "cache-offline")
    srv.stop()
    m = mount(srv.url("media/"), extra=MOUNT_ARGS, cache_dir=cache)
    assert guarded(lambda: sorted(os.listdir(m.mountpoint)), what="ls") == ["a.bin", "b c.bin"]
    assert os.stat(m.path("b c.bin")).st_size == 12_000


def test_a_cache_made_when_one_index_was_a_directory_in_the_root_serves_it_as_the_root(mount, srv, tmp_path):
    # Before, one index was shown as mnt/media/...; a list file of it still
    # is. The cache is keyed by URL: the root of the same index reads it.
    files = {"a.bin": data_of(300_000, 8)}
    serve_listing(srv, files)
    listing = tmp_path / "one.list"
    listing.write_text(srv.url("media/") + "\n")
    cache = tmp_path / "cache-layout"
    m = mount(listing, extra=MOUNT_ARGS, cache_dir=cache)
    assert read_whole(m.path("media/a.bin")) == files["a.bin"]
    assert m.unmount() == 0
    srv.clear_log()
    m = mount(srv.url("media/"), extra=MOUNT_ARGS, cache_dir=cache)
    assert os.listdir(m.mountpoint) == ["a.bin"]
    assert read_whole(m.path("a.bin")) == files["a.bin"]
    srv.wait_idle(WAIT)
    assert [r.path for r in srv.requests if r.path != "/media/"] == [], "a cached file was asked for again"


def test_probe_answers_go_to_one_journal_which_cache_ls_lists_and_cache_clear_forgets(mount, srv, tmp_path):
    # A stat'ed, never read entry's content info is one record appended to
    # <cache>/answers, not an entry directory (two new inodes each).
    files = {f"f{i:02d}.bin": data_of(2000 + i, i) for i in range(20)}
    cache = listed_once(mount, srv, files, tmp_path / "cache-answers")
    assert (cache / "answers").stat().st_size > 0
    assert list((cache / "v1").iterdir()) == [], "answers were saved as entry directories"

    ls = mediafs("cache", "ls", "--cache-dir", str(cache))
    assert ls.returncode == 0, ls.stderr
    rows = [line for line in ls.stdout.splitlines() if "://" in line]
    assert sorted(line.split()[-1] for line in rows) == sorted(srv.url(f"media/{n}") for n in files), ls.stdout
    assert all(" 0.0% " in line for line in rows), ls.stdout
    assert ls.stdout.splitlines()[-1].startswith("20 entries"), ls.stdout

    gone = srv.url("media/f03.bin")
    cleared = mediafs("cache", "clear", "--cache-dir", str(cache), gone)
    assert cleared.returncode == 0, cleared.stderr
    missing = mediafs("cache", "clear", "--cache-dir", str(cache), gone)
    assert missing.returncode != 0 and "no cache entry" in missing.stderr, missing.stderr

    # Only the forgotten answer is asked again.
    srv.clear_log()
    m = mount(srv.url("media/"), extra=MOUNT_ARGS, cache_dir=cache)
    stat_every_entry(m, files)
    asked = sorted({r.path for r in srv.requests if r.path != "/media/"})
    assert asked == ["/media/f03.bin"], asked


def test_refresh_of_a_listing_whose_server_fails_keeps_the_old_listing_and_says_so(mount, srv):
    files = {"a.bin": data_of(10_000, 3)}
    serve_listing(srv, files)
    m = mount(srv.url("media/"), extra=MOUNT_ARGS)
    assert os.listdir(m.mountpoint) == ["a.bin"]
    srv.set_fault("media/", "status", status=503)
    with pytest.raises(OSError) as failure:
        xset(m.mountpoint, "refresh", "1")
    assert failure.value.errno == errno.EIO
    assert os.listdir(m.mountpoint) == ["a.bin"]
    assert "serving its last listing" in m.stderr()


def test_refresh_is_refused_on_a_root_of_sources_and_on_files(mount, srv):
    files = {"a.bin": data_of(1_000, 4)}
    serve_listing(srv, files)
    srv.add("b.bin", data_of(2_000, 14))
    # Two sources: the root holds their names, and is not listed.
    m = mount(srv.url("media/"), srv.url("b.bin"), extra=MOUNT_ARGS)
    assert sorted(os.listdir(m.mountpoint)) == ["b.bin", "media"]
    assert "user.mediafs.refresh" not in os.listxattr(m.mountpoint)
    with pytest.raises(OSError) as failure:
        xset(m.mountpoint, "refresh", "1")
    assert failure.value.errno == errno.ENOTSUP
    with pytest.raises(OSError) as failure:
        xset(m.path("media/a.bin"), "refresh", "1")
    assert failure.value.errno == errno.ENOTSUP
    files["c.bin"] = data_of(3_000, 15)
    serve_listing(srv, files)
    xset(m.path("media"), "refresh", "1")
    assert sorted(os.listdir(m.path("media"))) == ["a.bin", "c.bin"]


def test_a_directory_whose_server_stopped_still_lists_after_its_cache_time(mount, srv):
    files = {"a.bin": data_of(50_000, 5), "b.bin": data_of(60_000, 6)}
    serve_listing(srv, files)
    m = mount(srv.url("media/"), extra=MOUNT_ARGS + ["--dir-cache-time", "1s"])
    assert sorted(os.listdir(m.mountpoint)) == ["a.bin", "b.bin"]
    assert read_whole(m.path("a.bin")) == files["a.bin"]
    srv.stop()
    time.sleep(1.5)  # past the directory cache time, so a refresh is due
    for _ in range(3):
        listed = guarded(lambda: sorted(os.listdir(m.mountpoint)), what="ls")
        assert listed == ["a.bin", "b.bin"], m.stderr()
        time.sleep(0.5)
    assert guarded(lambda: read_whole(m.path("a.bin"))) == files["a.bin"]
    assert "serving its last listing" in m.stderr()


def test_a_slow_listing_refresh_does_not_block_stat_of_a_known_entry(mount, srv):
    files = {"a.bin": data_of(50_000, 7)}
    serve_listing(srv, files)
    m = mount(srv.url("media/"), extra=MOUNT_ARGS + ["--dir-cache-time", "1s"])
    assert os.listdir(m.mountpoint) == ["a.bin"]
    assert os.stat(m.path("a.bin")).st_size == 50_000
    # The next listing is answered after 8 s (within the mount's 10 s timeout):
    # a lookup that waited for it would return only once it is done.
    srv.set_fault("media/", "drip", delay=8)
    srv.clear_log()
    time.sleep(1.5)  # past the directory cache time, and the kernel's 1 s entry cache
    assert guarded(lambda: os.listdir(m.mountpoint), what="ls") == ["a.bin"]
    srv.wait_for(lambda rs: any(r.path == "/media/" for r in rs), timeout=WAIT)
    time.sleep(1.1)  # the kernel forgets the entry, so stat asks mediafs
    size = guarded(lambda: os.stat(m.path("a.bin")).st_size, what="stat")
    listed = guarded(lambda: os.listdir(m.mountpoint), what="ls")
    in_flight = [r for r in listing_gets(srv) if not r.done]
    assert size == 50_000 and listed == ["a.bin"]
    assert in_flight, "stat and ls returned only after the listing refresh ended: they waited on it"
    assert len(listing_gets(srv)) == 1, "more than one refresh of one directory at a time"


def test_dir_cache_time_needs_a_duration(fuse, tmp_path):
    from harness import mediafs
    mp = tmp_path / "mnt"
    mp.mkdir()
    r = mediafs("mount", "-f", "--cache-dir", tmp_path / "c", "--dir-cache-time", "soon",
                "http://127.0.0.1:9/media/", mp)
    assert r.returncode == 2 and "--dir-cache-time" in r.stderr, r.stderr


def test_a_listing_that_drops_most_names_is_believed_only_when_a_second_says_the_same(mount, srv):
    """A gateway restarting answers 200 with nothing, or a fraction: a media
    server that saw its library empty would clean it. Such a listing keeps
    the old names until a second one, --listing-doubt later, says the same."""
    files = {f"e{i:03d}.mkv": b"x" * (100 + i) for i in range(500)}
    serve_listing(srv, files)
    m = mount(srv.url("media/"), extra=MOUNT_ARGS + ["--dir-cache-time", "1s", "--listing-doubt", "3s"])
    assert len(os.listdir(m.mountpoint)) == 500

    def listed_with(names):
        """Serves `names` as the listing, then looks until mediafs fetched
        it (one more GET of the index); every look must show all 500."""
        srv.add("media/", index_html(sorted(names)).encode(), content_type="text/html")
        before = len(listing_gets(srv))
        deadline = time.monotonic() + WAIT
        while len(listing_gets(srv)) <= before:
            assert time.monotonic() < deadline, "no refresh of the listing"
            assert len(os.listdir(m.mountpoint)) == 500, "a name vanished at the first listing that dropped it"
            time.sleep(0.1)

    # Empty once, then whole again: no name ever vanishes.
    listed_with([])
    assert len(os.listdir(m.mountpoint)) == 500
    assert "answered with 0 of its 500 names: not believed" in m.stderr(), m.stderr()
    listed_with(files)
    # Ten of 500, then whole: the same.
    listed_with(sorted(files)[:10])
    assert "answered with 10 of its 500 names" in m.stderr(), m.stderr()
    listed_with(files)
    assert len(os.listdir(m.mountpoint)) == 500
    assert "said again" not in m.stderr()

    # A person's delete of a few is believed at once.
    listed_with(sorted(files)[3:])
    deadline = time.monotonic() + WAIT
    while len(os.listdir(m.mountpoint)) != 497:
        assert time.monotonic() < deadline, "dropping 3 of 500 was not believed"
        time.sleep(0.1)

    # Empty, and empty again after the delay: believed, the names go.
    srv.add("media/", index_html([]).encode(), content_type="text/html")
    deadline = time.monotonic() + WAIT
    while os.listdir(m.mountpoint):
        assert time.monotonic() < deadline, f"an empty listing said twice was not believed:\n{m.stderr()}"
        time.sleep(0.2)
    assert "said again that 497 of its 497 names are gone: believed" in m.stderr(), m.stderr()


def test_the_users_refresh_believes_a_listing_that_drops_every_name(mount, srv):
    files = {f"e{i:02d}.mkv": b"y" * 10 for i in range(20)}
    serve_listing(srv, files)
    m = mount(srv.url("media/"), extra=MOUNT_ARGS)
    assert len(os.listdir(m.mountpoint)) == 20
    srv.add("media/", index_html([]).encode(), content_type="text/html")
    xset(m.mountpoint, "refresh", "1")
    assert os.listdir(m.mountpoint) == []
    assert "not believed" not in m.stderr()


def test_listing_doubt_needs_a_duration(fuse, tmp_path):
    r = mediafs("mount", "-f", "--cache-dir", tmp_path / "c", "--listing-doubt", "twice",
                "http://127.0.0.1:9/media/", tmp_path)
    assert r.returncode == 2 and "--listing-doubt" in r.stderr, r.stderr
