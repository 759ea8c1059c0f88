"""`--poll-interval`: each listed directory is asked, once an interval,
whether it changed, for the least its kind can ask; only a changed one is
listed again (decision 0049). Against real servers that count what they
received:

- Apache mod_dav, a library of 1,000 directories (as the issue asks): with
  nothing changed, every poll is one PROPFIND of depth 0 per directory and
  none of depth 1; one file added in one directory lists that directory
  alone, and the name appears.
- Polls never go ahead of a reader: while readers' requests fill their
  server's places, no poll reaches it; once they are answered, polls resume.
- An HTML index on a FaultServer that gives an ETag: unchanged, polls are
  answered 304 and nothing is listed; changed, the page is listed again and
  the new name appears. Without an ETag (nor an If-Modified-Since it
  honours), each poll is the whole page, its entries compared, and an
  unchanged page is not listed.

Waits are bounded hang guards on events (requests logged, a name shown);
nothing is asserted of a clock.
"""

import os
import shutil
import time

from davservers import ApacheDav, make_served_dir
from harness import in_thread, index_html, mediafs, read_range, wait_until

DIRECTORIES = 1000
WAIT = 60.0


def test_webdav_polls_are_one_depth0_propfind_per_directory_and_only_a_changed_one_is_listed(mount):
    served = make_served_dir()
    server = ApacheDav(served)
    try:
        names = [f"d{i:03d}" for i in range(DIRECTORIES)]
        for name in names:
            (served / name).mkdir()
            (served / name / "a.mkv").write_bytes(b"a" * 100)
        for path in [served, *served.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        server.start()
        m = mount(server.url("open").replace("http://", "dav://"),
                  extra=["--timeout", "10", "--poll-interval", "2s", "--poll-rate", "500"])
        # Each directory is listed once (a lookup), which starts its polls.
        assert sorted(os.listdir(m.mountpoint)) == names
        for name in names:
            assert os.listdir(m.path(name)) == ["a.mkv"]
        paths = {"/open/"} | {f"/open/{n}/" for n in names}

        # Nothing changed: two rounds of polls, every directory asked at
        # depth 0 and none listed.
        server.log.clear()
        rows = server.log.wait_for(
            lambda _: all(n >= 2 for n in depth0_counts(server, paths).values()),
            "two depth-0 PROPFINDs of every directory", timeout=WAIT)
        propfinds = server.log.propfinds()
        assert {p for p, d in propfinds if d == "0"} == paths
        assert [p for p, d in propfinds if d != "0"] == [], "a directory was listed with nothing changed"
        assert all(r[0] == "PROPFIND" for r in rows), rows

        # One file added in one directory: that one alone is listed, and the name shows.
        server.log.clear()
        (served / "d042" / "new.mkv").write_bytes(b"n" * 50)
        (served / "d042" / "new.mkv").chmod(0o644)
        wait_until(lambda: "new.mkv" in os.listdir(m.path("d042")), "the added name to show", timeout=WAIT)
        # A round after it, so a stray listing elsewhere would have been sent.
        server.log.clear()
        server.log.wait_for(lambda _: all(n >= 1 for n in depth0_counts(server, paths).values()),
                            "another round of polls", timeout=WAIT)
        assert [p for p, d in server.log.propfinds() if d != "0"] == [], "listed again with nothing changed"
    finally:
        server.remove()
        shutil.rmtree(served, ignore_errors=True)


def test_webdav_listing_of_the_changed_directory_alone(mount):
    """The directory a file was added to is listed (depth 1) and no other."""
    served = make_served_dir()
    server = ApacheDav(served)
    try:
        for name in ("x", "y", "z"):
            (served / name).mkdir()
        for path in [served, *served.rglob("*")]:
            path.chmod(0o755)
        server.start()
        m = mount(server.url("open").replace("http://", "dav://"),
                  extra=["--timeout", "10", "--poll-interval", "1s"])
        for name in ("x", "y", "z"):
            assert os.listdir(m.path(name)) == []
        server.log.clear()
        (served / "y" / "new.mkv").write_bytes(b"n" * 50)
        (served / "y" / "new.mkv").chmod(0o644)
        wait_until(lambda: os.listdir(m.path("y")) == ["new.mkv"], "the added name to show", timeout=WAIT)
        listed = [p for p, d in server.log.propfinds() if d == "1"]
        assert listed == ["/open/y/"], listed
    finally:
        server.remove()
        shutil.rmtree(served, ignore_errors=True)


def depth0_counts(server, paths):
    counts = dict.fromkeys(paths, 0)
    for path, depth in server.log.propfinds():
        if depth == "0" and path in counts:
            counts[path] += 1
    return counts


def index_gets(srv):
    return [r for r in srv.requests if r.method == "GET" and r.path == "/media/"]


def test_html_index_polls_are_304_while_unchanged_and_a_change_is_listed_again(mount, srv):
    files = {"a.mkv": b"a" * 100, "b.mkv": b"b" * 100}
    for name, data in files.items():
        srv.add(f"media/{name}", data)
    srv.add("media/", index_html(sorted(files)).encode(), content_type="text/html")
    m = mount(srv.url("media/"), extra=["--timeout", "10", "--poll-interval", "1s"])
    assert sorted(os.listdir(m.mountpoint)) == ["a.mkv", "b.mkv"]
    # The listing, one whole poll that learns the ETag, then 304s only.
    srv.wait_for(lambda _: sum(r.status == 304 for r in index_gets(srv)) >= 3, timeout=WAIT)
    gets = index_gets(srv)
    first_304 = next(i for i, r in enumerate(gets) if r.status == 304)
    assert [r.status for r in gets[:first_304]] == [200, 200], [(r.status, r.headers) for r in gets]
    assert all(r.status == 304 and r.headers.get("If-None-Match") for r in gets[first_304:])

    # Changed: the poll's 200, then one listing, and the name shows.
    srv.add("media/c.mkv", b"c" * 100)
    srv.add("media/", index_html(["a.mkv", "b.mkv", "c.mkv"]).encode(), content_type="text/html")
    before = len(index_gets(srv))
    wait_until(lambda: "c.mkv" in os.listdir(m.mountpoint), "the added name to show", timeout=WAIT)
    # Back to 304s: the listing kept the poll's ETag.
    srv.wait_for(lambda _: sum(r.status == 304 for r in index_gets(srv)[before:]) >= 2, timeout=WAIT)
    after = index_gets(srv)[before:]
    whole = [r for r in after if r.status == 200]
    assert len(whole) == 2, [(r.status, r.headers.get("If-None-Match")) for r in after]
    assert whole[0].headers.get("If-None-Match"), "the first 200 is the poll's"
    assert not whole[1].headers.get("If-None-Match"), "the second is the listing's"


def test_no_poll_reaches_a_server_whose_places_readers_fill(mount, srv):
    """Six reads held at the server (of its eight places, two kept for
    reads): the poll, at the lowest priority, waits in the fetcher and the
    server sees none until the reads are answered."""
    names = [f"f{i}.bin" for i in range(6)]
    for name in names:
        srv.add(f"media/{name}", bytes(range(256)) * 4096)
    srv.add("media/", index_html(names).encode(), content_type="text/html")
    m = mount(srv.url("media/"), extra=["--timeout", "20", "--poll-interval", "1s"])
    assert sorted(os.listdir(m.mountpoint)) == names
    srv.wait_for(lambda _: sum(r.status == 304 for r in index_gets(srv)) >= 2, timeout=WAIT)
    for name in names:
        srv.set_fault(f"media/{name}", "hold")
    reads = [in_thread(lambda name=name: read_range(m.path(name), 0, 4096), deadline=WAIT) for name in names]
    try:
        wait_until(lambda: sum(srv.held(f"media/{n}") for n in names) == len(names), "six reads held", timeout=WAIT)
        polls = len(index_gets(srv))
        # Three intervals: a poll a second would have come by now.
        time.sleep(3)
        assert len(index_gets(srv)) == polls, "a poll went ahead of readers waiting at its server"
    finally:
        for name in names:
            srv.release(f"media/{name}")
    for read in reads:
        assert read() == (bytes(range(256)) * 16)
    srv.wait_for(lambda _: len(index_gets(srv)) > polls, timeout=WAIT)


def test_html_index_without_validators_is_compared_by_its_entries_and_not_listed_while_unchanged(mount, srv):
    srv.add("media/a.mkv", b"a" * 100)
    srv.add("media/", index_html(["a.mkv"]).encode(), content_type="text/html")
    srv.set_fault("media/", "no_etag")
    m = mount(srv.url("media/"), extra=["--timeout", "10", "--poll-interval", "1s", "-d"])
    assert os.listdir(m.mountpoint) == ["a.mkv"]
    srv.wait_for(lambda _: len(index_gets(srv)) >= 4, timeout=WAIT)
    assert "changed; listing it again" not in m.stderr()
    srv.add("media/b.mkv", b"b" * 100)
    srv.add("media/", index_html(["a.mkv", "b.mkv"]).encode(), content_type="text/html")
    wait_until(lambda: sorted(os.listdir(m.mountpoint)) == ["a.mkv", "b.mkv"], "the added name to show", timeout=WAIT)
    assert m.stderr().count("changed; listing it again") == 1, m.stderr()


def test_poll_interval_and_rate_need_bounded_values(fuse, tmp_path):
    for option, value in (("--poll-interval", "often"), ("--poll-interval", "0.5s"),
                          ("--poll-rate", "0"), ("--poll-rate", "1e9")):
        r = mediafs("mount", "-f", "--cache-dir", tmp_path / "c", option, value,
                    "http://127.0.0.1:9/x/", tmp_path)
        assert r.returncode != 0
        assert option in r.stderr, r.stderr


def test_s3_polls_are_one_first_page_request_per_prefix_and_only_a_changed_prefix_is_listed(mount, monkeypatch, tmp_path):
    """S3 has no cheap "changed since": a poll is the first page of the
    prefix's listing, the same request a listing starts with, so the
    server's count says a poll per prefix a round, and mediafs's own log
    (`-d`: a line each listing) says nothing was listed."""
    from s3proxy import CheckingProxy, MotoServer, own_aws_environment
    moto = MotoServer()
    proxy = CheckingProxy(moto.port, region="us-east-1")
    try:
        client = moto.client()
        client.create_bucket(Bucket="media")
        for d in ("d0", "d1", "d2"):
            client.put_object(Bucket="media", Key=f"lib/{d}/a.bin", Body=b"a" * 10)
        proxy.add_key("AKIDPOLLTEST", "s3cr3t")
        own_aws_environment(monkeypatch, tmp_path, ("AKIDPOLLTEST", "s3cr3t"))
        m = mount("s3://media/lib/", extra=["--s3-endpoint", proxy.url, "--timeout", "10", "-d",
                                            "--poll-interval", "1s"])
        assert sorted(os.listdir(m.mountpoint)) == ["d0", "d1", "d2"]
        for d in ("d0", "d1", "d2"):
            assert os.listdir(m.path(d)) == ["a.bin"]
        prefixes = ["lib/", "lib/d0/", "lib/d1/", "lib/d2/"]

        def per_prefix():
            counts = dict.fromkeys(prefixes, 0)
            for seen in proxy.requests(method="GET", list_only=True):
                if seen.query.get("prefix") in counts:
                    counts[seen.query["prefix"]] += 1
            return counts

        listed = m.stderr().count("debug: listed s3://")
        proxy.clear()
        wait_until(lambda: min(per_prefix().values()) >= 3, "three polls of every prefix", timeout=WAIT)
        # (One in flight has no status yet.)
        refused = [(r.path, r.status, r.refused) for r in proxy.requests() if r.status not in (0, 200)]
        assert refused == [], refused
        assert m.stderr().count("debug: listed s3://") == listed, "listed again with nothing changed"

        client.put_object(Bucket="media", Key="lib/d1/b.bin", Body=b"b" * 10)
        wait_until(lambda: sorted(os.listdir(m.path("d1"))) == ["a.bin", "b.bin"], "the added name to show",
                   timeout=WAIT)
        assert m.stderr().count("debug: listed s3://") == listed + 1
        assert "debug: listed s3://media/lib/d1/: 2 entries" in m.stderr()
    finally:
        proxy.stop()
        moto.stop()
