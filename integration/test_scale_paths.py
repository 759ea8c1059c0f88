"""No quadratic paths: names, listings and probes cost O(n log n) or better
in the number of entries. Each test uses a size at which a quadratic path
would run for minutes, far past the hang guards (the mount's 20 s to appear,
the harness's read deadline), while a linear one takes seconds; and the
listing's requests are counted: one per entry plus the listing, never one per
entry per stat or per readdir chunk. No clock is asserted."""

import os
import random

import pytest

from conftest import Nginx
from harness import guarded, read_whole

COLLIDING = 50_000
LISTED = 10_000


def test_fifty_thousand_urls_of_one_name_mount_with_the_names_numbered_in_order(mount, server, source, tmp_path):
    expected = source("small.bin").read_bytes()
    listing = tmp_path / "same.list"
    listing.write_text("".join(f"same.bin\t{server.url('small.bin')}?n={i}\n" for i in range(COLLIDING)))
    m = mount(listing)
    server.clear_log()
    # The names are made as the mount starts, and its first answer waits
    # for them: 6 minutes when each copy tried every number before its own.
    assert guarded(lambda: os.stat(m.path("same.bin")).st_size, what="the first stat") == len(expected)
    # Stats by name, not a readdir: a readdir would probe all 50,000.
    for name in ("same.bin", "same (2).bin", f"same ({COLLIDING - 1}).bin", f"same ({COLLIDING}).bin"):
        assert os.stat(m.path(name)).st_size == len(expected), name
    assert not os.path.exists(m.path(f"same ({COLLIDING + 1}).bin"))
    assert read_whole(m.path(f"same ({COLLIDING}).bin")) == expected
    assert len([e for e in server.log() if e.method == "HEAD"]) <= 4 + 2, "a stat probed more than its own entry"


@pytest.fixture
def listed_server(tmp_path):
    """An nginx of the test's own serving many/ : LISTED small files of distinct
    sizes and an HTML index of them (what nginx's autoindex writes)."""
    root = tmp_path / "root"
    many = root / "many"
    many.mkdir(parents=True)
    rows = []
    for i in range(LISTED):
        name = f"f{i:05d}.bin"
        (many / name).write_bytes(name.encode() * (1 + i % 7))
        rows.append(f'<a href="{name}">{name}</a>')
    (many / "index.html").write_text("<html><body><pre><a href=\"../\">../</a>\n" + "\n".join(rows)
                                     + "\n</pre></body></html>\n")
    server = Nginx(tmp_path / "nginx", root)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_listing_of_ten_thousand_files_lists_and_stats_with_one_request_per_entry(mount, listed_server):
    m = mount(listed_server.url("many/"))
    names = sorted(os.listdir(m.mountpoint))
    assert names == [f"f{i:05d}.bin" for i in range(LISTED)]
    sizes = {name: os.stat(m.path(name)).st_size for name in names}
    assert all(sizes[f"f{i:05d}.bin"] == 10 * (1 + i % 7) for i in range(LISTED)), "a wrong size"
    # Listed again, and stat'ed again: every answer is known by now.
    assert sorted(os.listdir(m.mountpoint)) == names
    for name in random.Random(3).sample(names, 100):
        assert read_whole(m.path(name)) == name.encode() * (1 + int(name[1:6]) % 7)
    log = listed_server.log()
    heads = [e for e in log if e.method == "HEAD"]
    assert len(heads) <= LISTED + 5, f"{len(heads)} probes for {LISTED} entries"
    assert len([e for e in log if e.uri == "/many/"]) <= 2, "the listing was fetched per lookup"
    assert len(log) <= LISTED + 100 + 10, f"{len(log)} requests for {LISTED} entries and 100 reads"


@pytest.fixture
def autoindexed(tmp_path):
    """nginx's own autoindex of LISTED small files of distinct sizes."""
    root = tmp_path / "root"
    many = root / "many"
    many.mkdir(parents=True)
    for i in range(LISTED):
        name = f"f{i:05d}.bin"
        (many / name).write_bytes(name.encode() * (1 + i % 7))
    yield from Nginx.serving(tmp_path / "nginx", root, autoindex=True)


def test_an_nginx_index_of_ten_thousand_files_lists_and_stats_with_one_request(mount, autoindexed):
    """nginx writes each file's length beside its link: `ls -l` of its
    index is the page alone (rclone sends a HEAD per file: 10,001
    requests). A file's first read takes its first answer's validators,
    with nothing dropped as a change."""
    m = mount(autoindexed.url("many/"))
    names = sorted(os.listdir(m.mountpoint))
    assert names == [f"f{i:05d}.bin" for i in range(LISTED)]
    sizes = {name: os.stat(m.path(name)).st_size for name in names}
    assert all(sizes[f"f{i:05d}.bin"] == 10 * (1 + i % 7) for i in range(LISTED)), "a wrong size"
    autoindexed.wait_quiet()
    log = autoindexed.log()
    assert [(e.method, e.uri) for e in log] == [("GET", "/many/")], f"{len(log)} requests for ls -l"
    for name in random.Random(5).sample(names, 100):
        assert read_whole(m.path(name)) == name.encode() * (1 + int(name[1:6]) % 7)
    assert "changed on the server" not in m.stderr()
