"""A real OpenSSH server for the SFTP tests (Debian's openssh-server), on
loopback, started by the test with a config, host key and authorized key of
its own (never the system's sshd, /etc/ssh or ~/.ssh), and stopped by pid.

What it logs is what the tests count: sshd's own log (-E) has one line
per login ("Accepted publickey for root"); OpenSSH's sftp-server, run at
INFO with its log on stderr into a file of its own, one per directory
listed ("opendir"), per file opened ("open") and what each close says was
read. A password user (a system user the test names) gets internal-sftp.
"""

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import harness
from davservers import _stop, _wait_listening


def keygen(path, comment="mediafs-test", key_type="ed25519"):
    """A fresh key pair (ed25519 unless said) at path and path.pub."""
    subprocess.run(["ssh-keygen", "-q", "-t", key_type, "-N", "", "-C", comment, "-f", str(path)],
                   check=True, timeout=30)
    return path


def fingerprint(public_key):
    """`SHA256:…`, as ssh-keygen -l prints a public key's."""
    out = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(public_key)], check=True,
                         capture_output=True, text=True, timeout=30).stdout
    return out.split()[1]


class OpenSSHServer:
    """sshd -D on 127.0.0.1:port in a directory of its own: host key,
    authorized_keys (one user key), a known_hosts a client may use, and
    the log. `password_user`, when given, may also log in by password."""

    def __init__(self, workdir, password_user=None, more_host_key_types=(), logins_droppable=False,
                 sftp_log_level="INFO"):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = harness.free_port()
        self.host_key = keygen(self.dir / "host_key", "mediafs-test-host")
        # Other host keys it offers too (as Debian's sshd has RSA, ECDSA
        # and Ed25519); known_hosts names only the first.
        more_keys = [keygen(self.dir / f"host_key_{t}", "mediafs-test-host", t) for t in more_host_key_types]
        self.user_key = keygen(self.dir / "user_key", "mediafs-test-user")
        self.authorized = self.dir / "authorized_keys"
        self.authorized.write_text((self.dir / "user_key.pub").read_text())
        self.authorized.chmod(0o644)
        self.log = self.dir / "sshd.log"
        self.sftp_log = self.dir / "sftp.log"
        self.known_hosts = self.dir / "known_hosts"
        self.known_hosts.write_text(self.known_hosts_line())
        self.password_user = password_user
        # With `logins_droppable`, the authorized key comes from a command
        # sshd runs for each publickey login, which, while `drop_logins`
        # is on, kills the connection's sshd before it answers: a server
        # lost in the middle of a login; while `hold_logins` is on, it
        # waits: a login that takes as long as the test wants. sshd runs such a command only
        # from a root-owned path no one else may write (not /tmp).
        keys_source = f"AuthorizedKeysFile {self.authorized}\n"
        self.drop_flag = None
        if logins_droppable:
            self.command_dir = Path(tempfile.mkdtemp(prefix="mediafs-sshd-", dir="/run"))
            self.command_dir.chmod(0o755)
            self.drop_flag = self.dir / "drop-logins"
            command = self.command_dir / "authorized-keys"
            self.hold_flag = self.dir / "hold-logins"
            command.write_text("#!/bin/sh\n"
                               f"if [ -e {self.drop_flag} ]; then kill -9 $PPID; exit 1; fi\n"
                               f"while [ -e {self.hold_flag} ]; do sleep 0.05; done\n"
                               f"exec cat {self.authorized}\n")
            command.chmod(0o755)
            keys_source = ("AuthorizedKeysFile none\n"
                           f"AuthorizedKeysCommand {command} %u\n"
                           "AuthorizedKeysCommandUser root\n")
        self.config = self.dir / "sshd_config"
        self.config.write_text(
            f"Port {self.port}\n"
            "ListenAddress 127.0.0.1\n"
            f"HostKey {self.host_key}\n"
            + "".join(f"HostKey {k}\n" for k in more_keys) +
            keys_source +
            f"PidFile {self.dir / 'sshd.pid'}\n"
            "PasswordAuthentication yes\n"
            "KbdInteractiveAuthentication no\n"
            "UsePAM no\n"
            "PermitRootLogin prohibit-password\n"
            "StrictModes no\n"
            "LogLevel VERBOSE\n"
            "MaxStartups 100\n"
            "MaxSessions 100\n"
            f"Subsystem sftp /usr/lib/openssh/sftp-server -e -l {sftp_log_level} 2>>{self.sftp_log}\n"
            + (f"Match User {password_user}\n    ForceCommand internal-sftp\n" if password_user else ""))
        self.proc = None

    def known_hosts_line(self, public_key=None, hashed=False):
        key = " ".join(Path(public_key or f"{self.host_key}.pub").read_text().split()[:2])
        line = f"[127.0.0.1]:{self.port} {key}\n"
        if not hashed:
            return line
        scratch = self.dir / "known_hosts.to-hash"
        scratch.write_text(line)
        subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(scratch)], check=True, capture_output=True, timeout=30)
        return scratch.read_text()

    @property
    def fingerprint(self):
        return fingerprint(f"{self.host_key}.pub")

    def url(self, path, user="root", password=None):
        who = user + (f":{password}" if password is not None else "")
        return f"sftp://{who}@127.0.0.1:{self.port}{path}"

    def start(self):
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        self.proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-f", str(self.config), "-E", str(self.log)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_listening(self.proc, self.port, "sshd", self.log)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        """Stops the listener by pid, then its sessions (children of it)
        by theirs: a session lives as long as its client's connection (the
        listener's exit does not end it), and a mount keeps its sessions,
        so each was waited on for 5 s before its TERM (15 s teardowns)."""
        if self.drop_flag is not None:
            self.hold_logins(False)
        if self.proc is not None:
            children = self.session_pids()
            _stop(self.proc)
            for pid in children:
                harness.stop_pid(pid, timeout=0)
            self.proc = None
        if self.drop_flag is not None:
            shutil.rmtree(self.command_dir, ignore_errors=True)

    def drop_logins(self, on):
        """While on, every publickey login's connection is killed before
        the server answers it (needs `logins_droppable`)."""
        if on:
            self.drop_flag.touch()
        else:
            self.drop_flag.unlink(missing_ok=True)

    def hold_logins(self, on):
        """While on, every publickey login waits before the server answers
        it (needs `logins_droppable`)."""
        if on:
            self.hold_flag.touch()
        else:
            self.hold_flag.unlink(missing_ok=True)

    def session_pids(self):
        """The listener's children: one sshd per connection."""
        if self.proc is None:
            return []
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        try:
            return [int(p) for p in path.read_text().split()]
        except OSError:
            return []

    def lines(self):
        return self.log.read_text(errors="replace").splitlines() if self.log.exists() else []

    def count(self, pattern):
        rx = re.compile(pattern)
        return sum(1 for line in self.lines() if rx.search(line))

    def logins(self, method="publickey", user="root"):
        return self.count(rf"Accepted {method} for {re.escape(user)} ")

    def sftp_lines(self):
        return self.sftp_log.read_text(errors="replace").splitlines() if self.sftp_log.exists() else []

    def opendirs(self):
        return sum(1 for line in self.sftp_lines() if line.startswith('opendir "'))

    def opens(self):
        return sum(1 for line in self.sftp_lines() if line.startswith('open "'))

    def wait_for(self, predicate, what, timeout=10.0):
        return harness.wait_until(lambda: predicate() or None, f"sshd's log to show {what}", timeout=timeout)
