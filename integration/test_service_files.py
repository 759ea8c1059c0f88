"""contrib/'s systemd units: well formed (systemd-analyze verify, where the
machine has it), and the service template's own command lines, run as
systemd would run them for instance `films` (paths moved under the test's
temp dir), mount the list file, unmount cleanly, and mount again after the
daemon was killed.
"""

import configparser
import os
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

import harness
from harness import data_of, read_whole

CONTRIB = Path(__file__).resolve().parent.parent / "contrib"
TEMPLATE = CONTRIB / "mediafs@.service"
MOUNT_UNIT = CONTRIB / "srv-media-films.mount"
INSTANCE = "films"


def unit(path):
    """A unit file as sections of key -> [values] (a key may repeat)."""
    parser = configparser.RawConfigParser(strict=False, dict_type=_MultiDict, interpolation=None)
    parser.optionxform = str
    parser.read_string(path.read_text())
    return {s: {k: v.split("\n") for k, v in parser.items(s)} for s in parser.sections()}


class _MultiDict(dict):
    """Keeps every value of a repeated key, joined by newlines."""

    def __setitem__(self, key, value):
        if isinstance(value, list) and key in self:
            self[key].extend(value)
        else:
            super().__setitem__(key, value)


def test_the_units_are_well_formed_and_name_what_the_docs_say():
    service = unit(TEMPLATE)
    assert service["Service"]["Type"] == ["simple"]
    assert service["Service"]["Restart"] == ["on-failure"]
    assert any(" -f " in line for line in service["Service"]["ExecStart"])
    assert any("fusermount3 -u " in line for line in service["Service"]["ExecStop"])
    assert "network-online.target" in service["Unit"]["After"][0]
    mount_unit = unit(MOUNT_UNIT)
    where = mount_unit["Mount"]["Where"][0]
    assert MOUNT_UNIT.stem == where.strip("/").replace("/", "-"), "a mount unit must be named after its path"
    assert mount_unit["Mount"]["Type"] == ["fuse.mediafs"]
    if shutil.which("systemd-analyze") is None:
        return  # the structure above is all this machine can check
    with_binary = TEMPLATE.read_text().replace("/usr/local/bin/mediafs", str(harness.MEDIAFS_BIN))
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"mediafs-units-{os.getpid()}"
    workdir.mkdir()
    try:
        (workdir / TEMPLATE.name).write_text(with_binary)
        shutil.copy(MOUNT_UNIT, workdir)
        for name in (f"mediafs@{INSTANCE}.service", MOUNT_UNIT.name):
            r = subprocess.run(["systemd-analyze", "verify", "--man=no", f"./{name}"], cwd=workdir,
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0 and r.stderr.strip() == "", f"{name}: {r.stderr}"
    finally:
        shutil.rmtree(workdir)


class ServiceRun:
    """The template's commands for one instance, with /etc/mediafs,
    /srv/media, /var/cache/mediafs and the binary moved for the test."""

    def __init__(self, base):
        self.etc = base / "etc"
        self.srv = base / "srv"
        self.cache = base / "cache"
        self.etc.mkdir()
        self.mountpoint = self.srv / INSTANCE
        self.service = unit(TEMPLATE)["Service"]
        self.proc = None

    def command(self, line):
        """(ignore_failure, argv) of an Exec line, as systemd expands it."""
        ignore = line.startswith("-")
        line = line.lstrip("-")
        for old, new in (("%i", INSTANCE), ("/usr/local/bin/mediafs", str(harness.MEDIAFS_BIN)),
                         ("/etc/mediafs", str(self.etc)), ("/srv/media", str(self.srv)),
                         ("/var/cache/mediafs", str(self.cache))):
            line = line.replace(old, new)
        env = self.environment()
        argv = []
        for word in shlex.split(line):
            if word.startswith("$") and word[1:].isidentifier():
                argv += env.get(word[1:], "").split()  # systemd's $VAR: split on white space
            else:
                argv.append(word)
        return ignore, argv

    def environment(self):
        (path,) = self.service["EnvironmentFile"]
        options = Path(self.command_path(path.lstrip("-")))
        env = {}
        if options.exists():
            for raw in options.read_text().splitlines():
                raw = raw.strip()
                if raw and not raw.startswith("#"):
                    key, value = raw.split("=", 1)
                    env[key] = value.strip('"')
        return env

    def command_path(self, path):
        return path.replace("%i", INSTANCE).replace("/etc/mediafs", str(self.etc))

    def run_pre(self):
        for line in self.service["ExecStartPre"]:
            ignore, argv = self.command(line)
            r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            assert ignore or r.returncode == 0, f"{argv}: {r.stderr}"

    def start(self, stderr_path):
        self.run_pre()
        (line,) = self.service["ExecStart"]
        _, argv = self.command(line)
        with open(stderr_path, "wb") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        harness.wait_until(lambda: harness.is_mounted(self.mountpoint) or self.proc.poll() is not None,
                           "the service's mount", timeout=30)
        assert self.proc.poll() is None, Path(stderr_path).read_text()

    def stop(self):
        for line in self.service["ExecStop"]:
            _, argv = self.command(line)
            subprocess.run(argv, capture_output=True, timeout=60)

    def cleanup(self):
        harness.fusermount_unmount(self.mountpoint)
        if self.proc is not None:
            harness.stop_popen(self.proc, timeout=0)


def test_the_service_mounts_its_list_file_stops_cleanly_and_remounts_after_a_crash(fuse, mediafs_bin, tmp_path, srv):
    films = {"Keynote.mp4": data_of(300_000, 21), "b.bin": data_of(70_000, 22)}
    srv.add("k.mp4", films["Keynote.mp4"])
    srv.add("b.bin", films["b.bin"])
    service = ServiceRun(tmp_path)
    (service.etc / f"{INSTANCE}.list").write_text(f"# films\nKeynote.mp4\t{srv.url('k.mp4')}\n{srv.url('b.bin')}\n")
    (service.etc / f"{INSTANCE}.options").write_text("MEDIAFS_OPTS=--timeout 10 --cache-max-size 1G\n")
    try:
        service.start(tmp_path / "run1.stderr")
        assert sorted(os.listdir(service.mountpoint)) == sorted(films)
        for name, data in films.items():
            assert read_whole(service.mountpoint / name) == data

        service.stop()
        assert service.proc.wait(30) == 0, (tmp_path / "run1.stderr").read_text()
        assert not harness.is_mounted(service.mountpoint)
        assert (service.cache / INSTANCE).is_dir(), "the cache is not where the unit puts it"

        service.start(tmp_path / "run2.stderr")
        service.proc.send_signal(signal.SIGKILL)
        service.proc.wait(30)
        assert harness.is_mounted(service.mountpoint), "a killed daemon should leave its mount behind"
        # What Restart=on-failure does next: ExecStartPre clears the dead mount.
        service.start(tmp_path / "run3.stderr")
        assert read_whole(service.mountpoint / "Keynote.mp4") == films["Keynote.mp4"]
        service.stop()
        assert service.proc.wait(30) == 0, (tmp_path / "run3.stderr").read_text()
        assert not harness.is_mounted(service.mountpoint)
    finally:
        service.cleanup()
