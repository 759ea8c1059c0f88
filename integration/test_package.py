"""The Debian package, tested as installed (issue 58): `make deb`'s script
packs the binary under test; the package goes into a fresh Debian root
(debroot.py: debootstrap's minbase, where there is no /opt/swift and no
Swift library anywhere) with apt, which fetches its dependencies from the
mirror. There: `mediafs --version`; an fstab line mounted with `mount
/srv/media` (fuse3's mount helper finding /usr/bin/mediafs on PATH)
against this test's nginx, a file read byte-exact and fetched once; the
installed systemd template checked by `systemd-analyze verify` and its
command lines run as systemd runs them; `dpkg -r` and `dpkg -P` leaving
the caches and the admin's config as Debian policy says. Beside it: the
release binary's `ldd`, lintian on the package, and `make install`'s files
under another PREFIX.

PID 1 here is not systemd, so the unit is not started by systemd itself:
its Exec lines are run in the root, in order, as test_service_files.py
runs the checked-in template's.
"""

import gzip
import hashlib
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

import harness
from conftest import Nginx
from debroot import DebRoot
from harness import data_of
from test_service_files import unit

BUILD_DEB = harness.REPO / "scripts" / "build-deb.sh"
VERSION_SWIFT = harness.REPO / "Sources" / "MediaSupport" / "MediaCacheVersion.swift"
INSTANCE = "films"
FILM = data_of(3 * 1024 * 1024 + 12_345, 58)

# The tests that take the .deb share one worker, so it is packed once.
pytestmark = pytest.mark.xdist_group("package")


def base_version():
    return re.search(r'static let string = "([^"]+)"', VERSION_SWIFT.read_text()).group(1)


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    """The .deb of the binary under test (MEDIAFS_DEB names a built one)."""
    if os.environ.get("MEDIAFS_DEB"):
        return Path(os.environ["MEDIAFS_DEB"])
    if not harness.MEDIAFS_BIN.exists():
        pytest.fail(f"{harness.MEDIAFS_BIN} does not exist: run `make build` (or set MEDIAFS_BIN)")
    out = tmp_path_factory.mktemp("deb")
    r = subprocess.run([str(BUILD_DEB), str(harness.MEDIAFS_BIN), str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return Path(r.stdout.strip().splitlines()[-1])


def test_the_release_binary_loads_no_library_of_the_swift_toolchain(mediafs_bin):
    r = subprocess.run(["ldd", str(mediafs_bin)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    libraries = [line.split()[0] for line in r.stdout.splitlines() if line.strip()]
    swift = [lib for lib in libraries if re.match(r"lib(swift|Foundation|dispatch|BlocksRuntime|_Foundation)", lib)]
    assert not swift, f"linked dynamically: {swift}"
    assert "/opt/swift" not in r.stdout and "not found" not in r.stdout, r.stdout
    assert any(lib.startswith("libfuse3.so") for lib in libraries), r.stdout


def test_the_package_is_lintian_clean_and_says_what_it_holds(deb):
    name = re.fullmatch(r"mediafs_(.+)_(\w+)\.deb", deb.name)
    assert name, deb.name
    assert name.group(1).startswith(base_version()), (name.group(1), base_version())
    assert name.group(2) == subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                                           text=True).stdout.strip()
    field = lambda key: subprocess.run(["dpkg-deb", "-f", str(deb), key], capture_output=True,
                                       text=True, check=True).stdout.strip()
    depends = [d.strip().split()[0] for d in field("Depends").split(",")]
    for needed in ("fuse3", "libfuse3-3", "libcurl4", "libxml2", "libc6"):
        assert needed in depends, field("Depends")
    files = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    for path in ("./usr/bin/mediafs", "./usr/share/man/man1/mediafs.1.gz", "./lib/systemd/system/mediafs@.service",
                 "./etc/mediafs/", "./usr/share/doc/mediafs/copyright"):
        assert path in files.split(), f"{path} not in the package:\n{files}"
    if shutil.which("lintian") is None:
        pytest.fail("lintian not found: run scripts/install-deps.sh")
    r = subprocess.run(["lintian", "--fail-on", "error,warning", str(deb)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


def test_make_install_puts_a_stripped_binary_and_a_unit_naming_it_under_prefix(mediafs_bin, tmp_path):
    """What `make install` runs, into a DESTDIR: the unit names the binary
    installed beside it, not the package's path."""
    r = subprocess.run([str(harness.REPO / "scripts" / "install-files.sh"), str(mediafs_bin), str(tmp_path),
                        "/opt/mediafs-test", "/opt/mediafs-test/lib/systemd/system"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    binary = tmp_path / "opt/mediafs-test/bin/mediafs"
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.strip() == f"mediafs {base_version()}", version
    sections = subprocess.run(["readelf", "-S", "-W", str(binary)], capture_output=True, text=True).stdout
    assert ".symtab" not in sections and ".debug_info" not in sections, "the installed binary is not stripped"
    service = unit(tmp_path / "opt/mediafs-test/lib/systemd/system/mediafs@.service")["Service"]
    assert service["ExecStart"][0].startswith("/opt/mediafs-test/bin/mediafs mount -f "), service["ExecStart"]
    man = tmp_path / "opt/mediafs-test/share/man/man1/mediafs.1.gz"
    assert gzip.decompress(man.read_bytes()) == (harness.REPO / "man" / "mediafs.1").read_bytes()


class InstalledService:
    """The installed mediafs@.service's Exec lines for one instance, run in
    the root as systemd would run them (the root's paths, its EnvironmentFile)."""

    def __init__(self, root):
        self.root = root
        self.service = unit(root.inside("/lib/systemd/system/mediafs@.service"))["Service"]
        self.proc = None

    def command(self, line):
        ignore = line.startswith("-")
        line = line.lstrip("-").replace("%i", INSTANCE)
        env = {}
        (path,) = self.service["EnvironmentFile"]
        options = self.root.inside(path.lstrip("-").replace("%i", INSTANCE))
        if options.exists():
            for raw in options.read_text().splitlines():
                if raw.strip() and not raw.strip().startswith("#"):
                    key, value = raw.strip().split("=", 1)
                    env[key] = value
        argv = []
        for word in shlex.split(line):
            if word.startswith("$") and word[1:].isidentifier():
                argv += env.get(word[1:], "").split()
            else:
                argv.append(word)
        return ignore, argv

    def start(self, stderr_path):
        for line in self.service["ExecStartPre"]:
            ignore, argv = self.command(line)
            r = self.root.run(*argv, check=False)
            assert ignore or r.returncode == 0, f"{argv}: {r.stderr}"
        (line,) = self.service["ExecStart"]
        _, argv = self.command(line)
        assert argv[0] == "/usr/bin/mediafs", argv
        with open(stderr_path, "wb") as err:
            self.proc = self.root.popen(argv, stdout=err, stderr=err)
        mountpoint = self.root.inside(f"/srv/media/{INSTANCE}")
        harness.wait_until(lambda: harness.is_mounted(mountpoint) or self.proc.poll() is not None,
                           "the service's mount", timeout=30)
        assert self.proc.poll() is None, Path(stderr_path).read_text()

    def stop(self):
        for line in self.service["ExecStop"]:
            _, argv = self.command(line)
            self.root.run(*argv, check=False)
        return self.proc.wait(30)

    def cleanup(self):
        if self.proc is not None:
            harness.fusermount_unmount(self.root.inside(f"/srv/media/{INSTANCE}"))
            harness.stop_popen(self.proc, timeout=0)


def test_installed_in_a_fresh_debian_root_it_mounts_from_fstab_and_from_its_unit(fuse, deb, tmp_path):
    www = tmp_path / "www"
    (www / "films").mkdir(parents=True)
    (www / "films" / "film.bin").write_bytes(FILM)
    root = None
    with_nginx = Nginx.serving(tmp_path / "nginx", www, autoindex=True)
    nginx = next(with_nginx)
    try:
        root = DebRoot(tmp_path / "root")
        # No Swift anywhere in the root: what runs there runs without it.
        assert not root.inside("/opt/swift").exists()
        assert root.run("find", "/", "-xdev", "-name", "libswiftCore*").stdout == ""
        root.mount_proc()
        root.make_fuse_device()
        shutil.copy(deb, root.inside(f"/tmp/{deb.name}"))
        root.apt_install(f"/tmp/{deb.name}")
        status = root.run("dpkg-query", "-W", "-f=${Status} ${Version}", "mediafs").stdout
        assert status.startswith("install ok installed "), status

        version = root.run("mediafs", "--version").stdout.strip()
        assert version == f"mediafs {base_version()}", version
        ldd = root.run("ldd", "/usr/bin/mediafs").stdout
        assert "not found" not in ldd and "swift" not in ldd.lower(), ldd

        # fstab: one directory source is the mount's root.
        url = f"{nginx.base_url}/films/"
        fstab = root.inside("/etc/fstab")
        fstab.write_text(fstab.read_text() + f"{url} /srv/media fuse.mediafs "
                         "cache_dir=/var/cache/mediafs/fstab,allow_other,_netdev 0 0\n")
        root.inside("/srv/media").mkdir(parents=True)
        root.run("mount", "/srv/media", timeout=60)
        mountpoint = root.inside("/srv/media")
        assert harness.is_mounted(mountpoint)
        daemons = root.pids()
        assert daemons, "no process in the root serves the mount"
        assert os.listdir(mountpoint) == ["film.bin"]
        got = root.run("sha256sum", "/srv/media/film.bin").stdout.split()[0]
        assert harness.read_whole(mountpoint / "film.bin") == FILM
        assert got == hashlib.sha256(FILM).hexdigest()
        root.run("umount", "/srv/media", timeout=60)
        harness.wait_pids_gone(daemons)
        assert not any(map(harness.pid_alive, daemons)), "the daemon outlived umount"
        assert not harness.is_mounted(mountpoint)
        nginx.wait_quiet(quiet=0.5)
        film = [e for e in nginx.log() if e.uri == "/films/film.bin"]
        assert film and all(e.status in (200, 206) for e in film), film
        assert sum(e.sent for e in film) == len(FILM), f"the file's bytes crossed the network more than once: {film}"

        # The unit as installed, checked by the root's own systemd (a machine
        # that runs the unit has one; minbase has none), then its commands
        # run for `films`.
        root.apt_install("systemd")
        r = root.run("systemd-analyze", "verify", "--man=no", f"mediafs@{INSTANCE}.service", check=False)
        assert r.returncode == 0 and r.stderr.strip() == "", r.stderr
        root.inside(f"/etc/mediafs/{INSTANCE}.list").write_text(f"# films\nfilm.bin\t{url}film.bin\n")
        root.inside(f"/etc/mediafs/{INSTANCE}.options").write_text("MEDIAFS_OPTS=--timeout 10\n")
        service = InstalledService(root)
        try:
            service.start(tmp_path / "service.stderr")
            assert harness.read_whole(root.inside(f"/srv/media/{INSTANCE}/film.bin")) == FILM
            assert service.stop() == 0, (tmp_path / "service.stderr").read_text()
            assert not harness.is_mounted(root.inside(f"/srv/media/{INSTANCE}"))
        finally:
            service.cleanup()
        cache = root.inside(f"/var/cache/mediafs/{INSTANCE}")
        assert cache.is_dir() and any(cache.iterdir()), "the unit's cache is not where it says"

        # dpkg -r: the program goes; the caches and the admin's files stay.
        root.run("dpkg", "-r", "mediafs", timeout=120)
        for gone in ("/usr/bin/mediafs", "/lib/systemd/system/mediafs@.service", "/usr/share/man/man1/mediafs.1.gz"):
            assert not root.inside(gone).exists(), f"{gone} left by dpkg -r"
        assert any(cache.iterdir()), "dpkg -r removed the cache"
        assert root.inside(f"/etc/mediafs/{INSTANCE}.list").exists(), "dpkg -r removed the admin's list"
        # dpkg -P: the caches go too; the admin's files are still theirs.
        root.run("dpkg", "-P", "mediafs", timeout=120)
        assert not root.inside("/var/cache/mediafs").exists(), "dpkg -P left /var/cache/mediafs"
        assert root.inside(f"/etc/mediafs/{INSTANCE}.list").exists(), "dpkg -P removed the admin's list"
        assert root.run("dpkg-query", "-W", "mediafs", check=False).returncode != 0
    finally:
        try:
            if root is not None:
                root.close()
        finally:
            next(with_nginx, None)
