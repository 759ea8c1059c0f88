"""Archives as folders, against archives no one here wrote: rarfile's own
test volumes (made by `rar`: RAR5 and RAR3 volume sets, an old-style
.rar/.r00/.r01 set, a solid archive, encrypted headers) and ZIPs made by
Python's zipfile, each member compared with what `unar` extracted
(scripts/fetch-archive-fixtures.sh). An nginx of this module's own serves
them in a listed directory and logs every request: the volumes are read by
range only, their heads at most 64 KiB a request, and a member's bytes are
ranges of its volumes, byte-exact across every volume edge. A film in
7 RAR5 volumes, too large to ship, is written here (rar5write.py, proved
by test_rar5write.py) and checked with unar before it is mounted."""

import errno
import hashlib
import io
import json
import os
import random
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

import rar5write
from conftest import Nginx, _video_codec
from harness import read_range, read_whole, run, xset

HEAD = 64 << 10
FILM_MEMBER = "Film (2026)/film.mkv"
FILM_VOLUMES = 7


def fixtures_dir():
    path = Path(os.environ.get("MEDIAFS_RARFILE_FIXTURES") or Path.home() / ".cache/mediafs-archive-fixtures")
    if not (path / "rar/rar5-vols.part1.rar").exists():
        hint = f"no archive fixtures at {path}: run `make archive-fixtures`"
        if os.environ.get("CI") == "true":
            pytest.fail(hint)
        pytest.skip("SKIPPED LOUDLY: " + hint)
    return path


SETS = {
    "rar5-vols": ["rar5-vols.part1.rar", "rar5-vols.part2.rar", "rar5-vols.part3.rar"],
    "rar3-vols": ["rar3-vols.part1.rar", "rar3-vols.part2.rar", "rar3-vols.part3.rar"],
    "rar3-old": ["rar3-old.rar", "rar3-old.r00", "rar3-old.r01"],
}
EXTRACTED = {"rar5-vols": "rar5-vols.part1.rar", "rar3-vols": "rar3-vols.part1.rar", "rar3-old": "rar3-old.rar"}
REFUSED = ["rar5-solid.rar", "rar5-hpsw.rar"]


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    fixtures = fixtures_dir()
    root = tmp_path_factory.mktemp("archives-www")
    lib = root / "lib"
    lib.mkdir()
    for names in SETS.values():
        for name in names:
            shutil.copy(fixtures / "rar" / name, lib / name)
    for name in REFUSED:
        shutil.copy(fixtures / "rar" / name, lib / name)
    shutil.copy(fixtures / "zip/stored.zip", lib / "stored.zip")
    (lib / "notes.txt").write_bytes(b"plain\n")
    # A directory that lists nothing (its index page has no links, as a
    # debrid link's directory seldom lists): a set's volumes are found by name.
    closed = root / "closed"
    closed.mkdir()
    for name in SETS["rar3-old"]:
        shutil.copy(fixtures / "rar" / name, closed / name)
    (closed / "index.html").write_text("<html><body>Nothing to see</body></html>\n")
    (root / "other").mkdir()
    (root / "other/x.bin").write_bytes(b"x" * 100)
    # A film stored in a ZIP by Python's zipfile, beside the same film plain.
    # Noise makes it megabytes (8.5 MB with libx264), so that each of its
    # RAR volumes below is many times a 64 KiB head read.
    film = root / "films"
    film.mkdir()
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc=duration=30:size=320x240:rate=25", "-vf", "noise=alls=8:allf=t",
                    "-c:v", *_video_codec(), "-g", "25", str(film / "film.mkv")], check=True, timeout=300)
    with zipfile.ZipFile(film / "film.zip", "w", compression=zipfile.ZIP_STORED) as archive:
        archive.write(film / "film.mkv", FILM_MEMBER)
    # The same film as 7 RAR5 volumes in a directory of their own, as
    # `rar a -m0 -vSIZE` splits it: each volume a seventh of the film and
    # room for its headers, the last what is left.
    (root / "rarfilm").mkdir()
    seventh = -(-os.path.getsize(film / "film.mkv") // FILM_VOLUMES)
    rar5write.write_rar5_volumes(film / "film.mkv", FILM_MEMBER, root / "rarfilm", "film", seventh + 1024)
    (film / "plain").mkdir()
    shutil.move(film / "film.mkv", film / "plain/film.mkv")
    for server in Nginx.serving(tmp_path_factory.mktemp("archives-nginx"), root, autoindex=True):
        yield server, fixtures


def expected_members(fixtures, folder):
    """{path in the archive: bytes} as unar extracted them."""
    base = fixtures / "extracted" / EXTRACTED[folder] if folder in EXTRACTED else fixtures / "zip/expected"
    return {str(p.relative_to(base)): p.read_bytes() for p in base.rglob("*") if p.is_file()}


def mounted_files(base):
    return {str(p.relative_to(base)): p for p in Path(base).rglob("*") if p.is_file()}


def test_sets_and_zips_are_folders_of_their_members_equal_to_what_unar_extracts(mount, library):
    server, fixtures = library
    server.clear_log()
    # Two sources, so that the listed directory is a folder of the mount.
    m = mount(server.url("lib/"), server.url("other/"), extra=("--timeout", "10"))
    lib = Path(m.path("lib"))
    names = sorted(os.listdir(lib))
    assert names == sorted(["rar5-vols", "rar3-vols", "rar3-old", "stored", "notes.txt", *REFUSED]), \
        (names, m.stderr())
    for folder in [*SETS, "stored"]:
        expected = expected_members(fixtures, folder)
        files = mounted_files(lib / folder)
        assert sorted(files) == sorted(expected), (folder, sorted(files))
        for path, data in expected.items():
            assert os.stat(files[path]).st_size == len(data), (folder, path)
            assert read_whole(files[path]) == data, (folder, path)
    # Refused archives stay files, each named in the log with why.
    for name in REFUSED:
        assert f"archive {name}" in m.stderr(), m.stderr()
    # Every volume was read by range; no head read asked more than 64 KiB.
    gets = [e for e in server.log() if e.method == "GET" and "/lib/" in e.uri and not e.uri.endswith("/")]
    assert gets and all(e.range for e in gets), [e for e in gets if not e.range]
    assert all(e.sent <= HEAD + 1024 for e in gets if e.uri.endswith(tuple(REFUSED))), gets


def test_reads_across_volume_edges_are_byte_exact(mount, library):
    server, fixtures = library
    m = mount(server.url("lib/"), server.url("other/"), extra=("--timeout", "10"))
    rng = random.Random(7)
    for folder in SETS:
        expected = expected_members(fixtures, folder)
        path, data = max(expected.items(), key=lambda item: len(item[1]))
        member = Path(m.path("lib")) / folder / path
        for _ in range(40):
            offset = rng.randrange(0, len(data))
            size = rng.choice([1, 4096, 65536, 150_000])
            assert read_range(member, offset, size) == data[offset:offset + size], (folder, offset, size)


def test_an_archive_url_alone_mounts_its_members_at_the_mountpoint(mount, library):
    """A set's first volume as the one SOURCE: its members at the
    mountpoint (as archivemount shows one), its other volumes found in the
    listing of their directory, every volume read by range."""
    server, fixtures = library
    server.clear_log()
    m = mount(server.url("lib/rar5-vols.part1.rar"), extra=("--timeout", "10"))
    expected = expected_members(fixtures, "rar5-vols")
    files = mounted_files(m.mountpoint)
    assert sorted(files) == sorted(expected), (sorted(files), m.stderr())
    for path, data in expected.items():
        assert read_whole(files[path]) == data, path
    log = server.log()
    assert [e.uri for e in log if e.uri.endswith("/")] == ["/lib/"], log
    volumes = [e for e in log if not e.uri.endswith("/")]
    assert {e.uri for e in volumes} == {"/lib/" + name for name in SETS["rar5-vols"]}, volumes
    assert all(e.method == "GET" and e.range for e in volumes), volumes


def test_an_archive_url_remounts_from_its_cache_with_the_server_gone(mount, library, tmp_path):
    server, fixtures = library
    cache = tmp_path / "archive-url-cache"
    expected = expected_members(fixtures, "rar5-vols")
    first = mount(server.url("lib/rar5-vols.part2.rar"), extra=("--timeout", "10"), cache_dir=cache)
    assert {p: read_whole(f) for p, f in mounted_files(first.mountpoint).items()} == expected, first.stderr()
    first.unmount()
    server.stop()
    try:
        second = mount(server.url("lib/rar5-vols.part2.rar"), extra=("--timeout", "2"), cache_dir=cache)
        files = mounted_files(second.mountpoint)
        assert sorted(files) == sorted(expected), second.stderr()
        assert {p: read_whole(f) for p, f in files.items()} == expected
    finally:
        server.start()


def test_archive_urls_beside_others_are_folders_and_a_set_no_index_lists_is_found_by_name(mount, library):
    server, fixtures = library
    server.clear_log()
    m = mount(server.url("closed/rar3-old.rar"), server.url("lib/stored.zip"), server.url("other/"),
              extra=("--timeout", "10"))
    assert sorted(os.listdir(m.mountpoint)) == ["other", "rar3-old", "stored"], m.stderr()
    for folder in ("rar3-old", "stored"):
        expected = expected_members(fixtures, folder)
        files = mounted_files(m.path(folder))
        assert sorted(files) == sorted(expected), (folder, sorted(files), m.stderr())
        for path, data in expected.items():
            assert read_whole(files[path]) == data, (folder, path)
    # The closed directory's page lists nothing: its volumes were asked for
    # by name, up to the first missing one, and only then read by range.
    heads = sorted(e.uri for e in server.log() if e.method == "HEAD" and e.uri.startswith("/closed/"))
    assert "/closed/rar3-old.r00" in heads and "/closed/rar3-old.r01" in heads, heads
    assert "/closed/rar3-old.r02" in heads, heads
    assert [e.status for e in server.log() if e.uri == "/closed/rar3-old.r02"] == [404]
    # A ZIP needs no sibling: no listing of its directory.
    assert not [e for e in server.log() if e.uri == "/lib/"], server.log()


def test_archives_off_shows_the_volumes_as_plain_files(mount, library):
    server, _ = library
    m = mount(server.url("lib/"), server.url("other/"), extra=("--archives", "off"))
    names = set(os.listdir(m.path("lib")))
    assert {*SETS["rar5-vols"], *SETS["rar3-old"], "stored.zip"} <= names, names
    assert not {"rar5-vols", "stored"} & names


def test_indexing_a_set_takes_two_rounds_of_reads_of_each_volume(mount, library):
    server, _ = library
    server.clear_log()
    m = mount(server.url("lib/"), server.url("other/"), extra=("--timeout", "10"))
    assert "rar5-vols" in os.listdir(m.path("lib"))
    for name in SETS["rar5-vols"]:
        asked = [e for e in server.log() if e.uri.endswith("/" + name)]
        assert 1 <= len(asked) <= 2 and all(e.range for e in asked), (name, asked)
        assert all(e.sent <= HEAD for e in asked), (name, asked)


def test_a_remount_shows_the_members_from_the_saved_index_with_the_server_gone(mount, library, tmp_path):
    server, fixtures = library
    cache = tmp_path / "shared-cache"
    expected = expected_members(fixtures, "rar5-vols")
    path, data = max(expected.items(), key=lambda item: len(item[1]))
    first = mount(server.url("lib/"), server.url("other/"), extra=("--timeout", "10"), cache_dir=cache)
    member = Path(first.path("lib")) / "rar5-vols" / path
    assert read_whole(member) == data
    names = sorted(os.listdir(first.path("lib")))
    first.unmount()
    server.stop()
    try:
        second = mount(server.url("lib/"), server.url("other/"), extra=("--timeout", "2"), cache_dir=cache)
        assert sorted(os.listdir(second.path("lib"))) == names, second.stderr()
        member = Path(second.path("lib")) / "rar5-vols" / path
        assert os.stat(member).st_size == len(data)
        assert read_whole(member) == data
    finally:
        server.start()


def probed(path):
    out = run("ffprobe", "-v", "error", "-show_entries", "format=duration:stream=codec_name,width",
              "-of", "json", str(path), timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def seeked_frames(path):
    """The frames' MD5s of the second a seek to 20 s decodes."""
    out = run("ffmpeg", "-hide_banner", "-loglevel", "error", "-ss", "20", "-i", str(path), "-t", "1",
              "-f", "framemd5", "-", timeout=120)
    assert out.returncode == 0, out.stderr
    return [line.split(",")[-1] for line in out.stdout.splitlines() if line and not line.startswith("#")]


def test_a_film_in_a_stored_zip_probes_and_seeks_as_the_plain_film_does(mount, library):
    server, _ = library
    m = mount(server.url("films/"), server.url("other/"), extra=("--timeout", "10"))
    films = Path(m.path("films"))
    assert sorted(os.listdir(films)) == ["film", "plain"], (os.listdir(films), m.stderr())
    member, plain = films / "film" / FILM_MEMBER, films / "plain/film.mkv"
    assert read_whole(member) == read_whole(plain)
    assert probed(member) == probed(plain)
    seeked = seeked_frames(member)
    assert len(seeked) >= 20 and seeked == seeked_frames(plain)


def test_a_film_in_seven_rar5_volumes_reads_as_the_film_by_ranges_of_its_volumes(mount, library, tmp_path):
    server, _ = library
    plain = server.root / "films/plain/film.mkv"
    film = plain.read_bytes()
    volumes = sorted((server.root / "rarfilm").iterdir())
    assert [v.name for v in volumes] == [f"film.part{i}.rar" for i in range(1, FILM_VOLUMES + 1)]
    # unar first: the set is a good one before mediafs is asked to read it.
    out = run("unar", "-quiet", "-no-directory", "-output-directory", tmp_path / "unar", volumes[0], timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "unar" / FILM_MEMBER).read_bytes() == film
    # Where each volume's part ends in the film, as lsar (not the writer) says.
    listed = run("lsar", "-j", volumes[0])
    assert listed.returncode == 0, listed.stderr
    lengths = [p["InputLength"] for p in json.loads(listed.stdout)["lsarContents"][0]["RAR5InputParts"]]
    assert len(lengths) == FILM_VOLUMES and sum(lengths) == len(film), lengths
    edges = [sum(lengths[:i]) for i in range(1, FILM_VOLUMES)]

    server.clear_log()
    m = mount(server.url("rarfilm/"), server.url("other/"), extra=("--timeout", "10"))
    folder = Path(m.path("rarfilm"))
    assert os.listdir(folder) == ["film"], (os.listdir(folder), m.stderr())
    member = folder / "film" / FILM_MEMBER
    assert os.stat(member).st_size == len(film)
    # Cold reads first, so each one's bytes come from the volumes, not the cache.
    for edge in edges:
        for offset, size in ((edge - 1, 2), (edge - 4096, 8192), (edge - 100_000, 150_000), (edge, 1)):
            assert read_range(member, offset, size) == film[offset:offset + size], (edge, offset, size)
    assert hashlib.sha256(read_whole(member)).digest() == hashlib.sha256(film).digest()
    assert probed(member) == probed(plain)
    seeked = seeked_frames(member)
    assert len(seeked) >= 20 and seeked == seeked_frames(plain)

    # Every volume was read by range only, and sent about what reading
    # needed: its bytes once, besides the index's head read (and a head's
    # worth of slack): a whole volume fetched again would show.
    gets = [e for e in server.log() if e.method == "GET" and "/rarfilm/" in e.uri and not e.uri.endswith("/")]
    assert gets and all(e.range for e in gets), [e for e in gets if not e.range]
    sent = {v.name: sum(e.sent for e in gets if e.uri.endswith("/" + v.name)) for v in volumes}
    for v in volumes:
        assert v.stat().st_size <= sent[v.name] <= v.stat().st_size + 2 * HEAD, (v.name, v.stat().st_size, sent)


def test_a_webdav_refresh_that_lists_the_volumes_unchanged_reads_no_header_again(mount, library):
    """WebDAV lists each file's size and ETag: a refresh that finds them
    as the index saw them keeps the index with no request; a volume that
    changed is indexed again and its members are the new bytes."""
    from davservers import ApacheDav, make_served_dir
    server_nginx, fixtures = library
    root = make_served_dir()
    shutil.copy(fixtures / "zip/stored.zip", root / "stored.zip")
    (root / "stored.zip").chmod(0o644)
    server = ApacheDav(root)
    server.start()
    try:
        m = mount(server.url("open"), server_nginx.url("other/"), extra=("--timeout", "10"))
        dav = Path(m.path("open"))
        assert os.listdir(dav) == ["stored"], (os.listdir(dav), m.stderr())
        try:
            assert read_whole(dav / "stored/café.txt") == (fixtures / "zip/expected/café.txt").read_bytes()
        except OSError:
            raise AssertionError(m.stderr())
        # Apache logs a request once its last byte went out: the read may
        # be done before the line is written.
        server.log.wait_for(lambda es: any(e[0] == "GET" for e in es), "the index reading the ZIP by range")
        server.log.clear()
        xset(dav, "refresh", "1")
        assert os.listdir(dav) == ["stored"]
        assert not server.log.methods("GET"), server.log.entries()
        # Another ZIP under the same name: indexed again, new bytes.
        with zipfile.ZipFile(root / "stored.zip", "w", compression=zipfile.ZIP_STORED) as archive:
            archive.writestr("café.txt", b"a new version of the file\n")
        xset(dav, "refresh", "1")
        server.log.wait_for(lambda es: any(e[0] == "GET" for e in es), "a changed volume indexed again")
        assert read_whole(dav / "stored/café.txt") == b"a new version of the file\n"
    finally:
        server.remove()


def test_a_volume_changed_under_a_reader_fails_its_reads_then_the_refresh_serves_the_new_member_whole(mount, srv):
    """A stored ZIP replaced on the server (same size, same layout, other
    bytes: a new ETag) while its member is half read: a read of bytes not
    yet cached meets the change (If-Range with the volume's ETag) and fails
    with EIO rather than mixing versions; the refresh indexes it again and
    the member is then the new bytes, every one of them."""
    rng = random.Random(11)
    old, new = rng.randbytes(8 << 20), rng.randbytes(8 << 20)

    def zipped(data):
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
            archive.writestr(zipfile.ZipInfo("show/ep1.bin", date_time=(2026, 1, 1, 0, 0, 0)), data)
        return out.getvalue()
    srv.add("show.zip", zipped(old), content_type="application/zip")
    m = mount(srv.url("show.zip"), extra=("--timeout", "10", "--revalidate", "never"))
    member = m.path("show/ep1.bin")
    assert read_range(member, 0, 1 << 20) == old[:1 << 20], m.stderr()
    volume_etag = srv.etag("show.zip")
    srv.replace("show.zip", zipped(new))
    try:
        got = read_range(member, 6 << 20, 1 << 20)
    except OSError as error:
        assert error.errno == errno.EIO, repr(error)
    else:
        assert got == old[6 << 20:7 << 20], "bytes of the new version served as the old member's"
    ranged = [r for r in srv.requests if r.path == "/show.zip" and r.range and r.range.startswith("bytes=")
              and r.status in (200, 206)]
    assert any(r.if_range == volume_etag for r in ranged), [(r.range, r.if_range, r.status) for r in ranged]
    xset(m.mountpoint, "refresh", "1")
    deadline = time.monotonic() + 20
    while True:
        try:
            if read_whole(member) == new:
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, ("the refresh never served the new member", m.stderr())
        time.sleep(0.2)
    assert read_range(member, 0, 1 << 20) == new[:1 << 20]
