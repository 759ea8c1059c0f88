"""Bad command lines: each must exit non-zero, name the bad argument, and
leave nothing mounted. Every other argument is good, so the failure can
only come from the one under test."""

import subprocess
from dataclasses import dataclass

import pytest

import harness


@dataclass
class Outcome:
    returncode: object  # None when mediafs was still running at the deadline
    output: str


def run_mediafs(mediafs_bin, args, mountpoint, tmp_path, timeout=20.0):
    """Run `mediafs mount -f ARGS`; if it wrongly mounts and stays, unmount
    and stop it by pid so the test can fail cleanly."""
    log = tmp_path / "mediafs.out"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(mediafs_bin), "mount", "-f", *map(str, args)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        returncode = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        returncode = None
    finally:
        if mountpoint is not None and returncode is None:
            harness.fusermount_unmount(mountpoint)
        harness.stop_popen(proc, timeout=0)
    return Outcome(returncode, log.read_text(errors="replace"))


def assert_rejected(outcome, named, mountpoint, mounts_before=0):
    assert outcome.returncode is not None, f"mediafs accepted the command line and kept running:\n{outcome.output}"
    assert outcome.returncode != 0, f"exit status 0:\n{outcome.output}"
    assert named in outcome.output, f"message does not name {named!r}:\n{outcome.output}"
    if mountpoint is not None:
        assert harness.mount_count(mountpoint) == mounts_before, "mount table changed"


@pytest.fixture
def good(server, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    return {"url": server.url("small.bin"), "mnt": mnt, "cache": tmp_path / "cache"}


def test_source_neither_url_nor_readable_file_is_rejected(mediafs_bin, good, tmp_path):
    bad = tmp_path / "no-such-list.txt"
    out = run_mediafs(mediafs_bin, ["--cache-dir", good["cache"], good["url"], bad, good["mnt"]], good["mnt"], tmp_path)
    assert_rejected(out, str(bad), good["mnt"])


def test_unsupported_scheme_is_rejected(mediafs_bin, good, tmp_path):
    bad = "gopher://127.0.0.1/small.bin"
    out = run_mediafs(mediafs_bin, ["--cache-dir", good["cache"], good["url"], bad, good["mnt"]], good["mnt"], tmp_path)
    assert_rejected(out, bad, good["mnt"])


def test_url_without_host_is_rejected(mediafs_bin, good, tmp_path):
    bad = "http://"
    out = run_mediafs(mediafs_bin, ["--cache-dir", good["cache"], bad, good["url"], good["mnt"]], good["mnt"], tmp_path)
    assert_rejected(out, bad, good["mnt"])


@pytest.mark.parametrize("suffix, why", [("#t=10", "#fragment"), ("?a=1 2", "a space")])
def test_url_with_a_fragment_or_a_space_is_refused_naming_it(mediafs_bin, good, tmp_path, suffix, why):
    """Mounted before, then ENOENT (the fragment never reaches the server)
    or EIO on read, with nothing in the log."""
    bad = good["url"] + suffix
    out = run_mediafs(mediafs_bin, ["--cache-dir", good["cache"], bad, good["mnt"]], good["mnt"], tmp_path)
    assert_rejected(out, bad, good["mnt"])
    assert why in out.output, out.output


def test_url_with_two_at_signs_in_its_authority_is_refused(mediafs_bin, good, tmp_path):
    bad = good["url"].replace("http://", "http://user@example.org@")
    out = run_mediafs(mediafs_bin, ["--cache-dir", good["cache"], bad, good["mnt"]], good["mnt"], tmp_path)
    assert_rejected(out, "more than one '@'", good["mnt"])


def test_list_file_with_bad_line_is_rejected_naming_file_and_line(mediafs_bin, good, tmp_path):
    listing = tmp_path / "media.list"
    listing.write_text(f"# comment\n{good['url']}\nthis is not a url\n")
    out = run_mediafs(mediafs_bin, ["--cache-dir", good["cache"], listing, good["mnt"]], good["mnt"], tmp_path)
    assert_rejected(out, f"{listing}:3", good["mnt"])


def test_missing_mountpoint_is_rejected(mediafs_bin, good, tmp_path):
    bad = tmp_path / "no-such-dir"
    out = run_mediafs(mediafs_bin, ["--cache-dir", good["cache"], good["url"], bad], bad, tmp_path)
    assert_rejected(out, str(bad), None)
    assert not bad.exists()


def test_mountpoint_that_is_a_regular_file_is_rejected(mediafs_bin, good, tmp_path):
    bad = tmp_path / "plain-file"
    bad.write_text("not a directory\n")
    out = run_mediafs(mediafs_bin, ["--cache-dir", good["cache"], good["url"], bad], bad, tmp_path)
    assert_rejected(out, str(bad), bad)


def test_cache_dir_that_cannot_be_created_is_rejected(mediafs_bin, good, tmp_path):
    # Root may write anywhere, so make the path impossible: under a file.
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    bad = blocker / "cache"
    out = run_mediafs(mediafs_bin, ["--cache-dir", bad, good["url"], good["mnt"]], good["mnt"], tmp_path)
    assert_rejected(out, str(bad), good["mnt"])


def test_no_mountpoint_given_is_rejected(mediafs_bin, good, tmp_path):
    out = run_mediafs(mediafs_bin, ["--cache-dir", good["cache"], good["url"]], None, tmp_path)
    assert out.returncode not in (None, 0), out.output
    assert out.output.strip(), "no message"


def test_already_mounted_mountpoint_is_rejected_and_first_mount_keeps_working(
        mount, mediafs_bin, server, source, tmp_path):
    first = mount(server.url("small.bin"))
    out = run_mediafs(mediafs_bin, ["--cache-dir", tmp_path / "cache2", server.url("small.bin"),
                                    first.mountpoint], first.mountpoint, tmp_path)
    assert_rejected(out, str(first.mountpoint), first.mountpoint, mounts_before=1)
    assert first.path("small.bin").read_bytes() == source("small.bin").read_bytes()


@pytest.mark.parametrize("option,value", [
    ("--scanners", "ffprobe,,mediainfo"),
    ("--scanners", ""),
    ("--handle-grace", "2h"),
    ("--handle-grace", "-1"),
    ("--handle-grace", "nan"),
    ("--scan-cache-size", "lots"),
    ("--scan-cache-size", "99999999999999999999"),
])
def test_bad_read_class_options_are_rejected(mediafs_bin, good, tmp_path, option, value):
    out = run_mediafs(mediafs_bin, ["--cache-dir", good["cache"], option, value, good["url"], good["mnt"]],
                      good["mnt"], tmp_path)
    assert_rejected(out, option, good["mnt"])
