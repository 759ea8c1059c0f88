"""Real WebDAV servers for the tests, on loopback, each with an access log the
tests read to check what the server received:

- `ApacheDav`: Apache httpd with mod_dav (Debian's apache2), started in the
  foreground with a config of its own in a 0755 temp dir; one tree served three
  times: /open/ (no auth), /basic/ (Basic), /digest/ (Digest); over https
  with a self-signed certificate when asked.
- `WsgiDav`: wsgidav on cheroot (PyPI), which writes its XML another way
  (ElementTree's `ns0:` prefixes, no `lp1:` live-property namespaces).

Both are stopped by pid, always. The served tree must be readable by
www-data (Apache drops root), so it lives in a 0755 temp dir of its own.
"""

import hashlib
import base64
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness

MODULES = Path("/usr/lib/apache2/modules")
REALM = "mediafs tests"


def make_served_dir():
    path = Path(tempfile.mkdtemp(prefix="mediafs-dav-"))
    path.chmod(0o755)
    return path


def _wait_listening(proc, port, what, log=None, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            detail = log.read_text(errors="replace") if log and log.exists() else ""
            raise RuntimeError(f"{what} exited at start (status {proc.returncode}):\n{detail}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} not listening on {port} after {timeout}s")


def _stop(proc, timeout=10.0):
    """TERM our own child server, KILL it if it lingers, and reap it."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class _Server:
    """A server process of our own, started on `self.port`, stopped by pid."""

    proc = None

    def _start(self, argv, what):
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(self.error_log, "ab"))
        try:
            _wait_listening(self.proc, self.port, what, self.error_log)
        except BaseException:
            self.stop()
            raise

    def stop(self):
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None


class AccessLog:
    """Lines of `method<TAB>path<TAB>status<TAB>user<TAB>start`, as the server
    logged them; `start` is when the request arrived, in microseconds since
    the epoch. Entries are the first four fields."""

    def __init__(self, path):
        self.path = path
        self.since = 0.0

    def entries(self):
        """The requests that arrived since the last `clear`: a server logs a
        request when it ends, so a transfer asked before the clear (and
        stopped or finished after it) would otherwise show as asked after."""
        if not self.path.exists():
            return []
        rows = []
        for line in self.path.read_text(errors="replace").splitlines():
            fields = line.split("\t")
            if len(fields) < 3:
                continue
            if len(fields) >= 5 and fields[4].isdigit() and int(fields[4]) / 1e6 < self.since:
                continue
            rows.append(tuple(fields[:4]) + ("",) * (4 - len(fields[:4])))
        return rows

    def clear(self):
        self.since = time.time()
        if self.path.exists():
            os.truncate(self.path, 0)

    def wait_for(self, predicate, what, timeout=10.0):
        """The entries, once predicate(entries) holds: a server logs a
        request after its last byte went out, so a reader may be done
        before the line is written."""
        return harness.wait_until(lambda: es if predicate(es := self.entries()) else None,
                                  f"the access log to show {what}", timeout=timeout)

    def propfinds(self):
        """(path, Depth header) of each PROPFIND since the last `clear`."""
        if not self.path.exists():
            return []
        rows = []
        for line in self.path.read_text(errors="replace").splitlines():
            fields = line.split("\t")
            if len(fields) < 6 or fields[0] != "PROPFIND":
                continue
            if fields[4].isdigit() and int(fields[4]) / 1e6 < self.since:
                continue
            rows.append((fields[1], fields[5]))
        return rows

    def methods(self, method):
        return [e for e in self.entries() if e[0] == method]


class ApacheDav(_Server):
    """Apache httpd + mod_dav serving `root` at /open/, /basic/ and /digest/."""

    def __init__(self, root, user="reader", password="dav-Pa55w0rd", tls=False):
        # Its own dir, not pytest's (0700): Apache's children, www-data, read
        # the password files and write the lock database there.
        self.workdir = make_served_dir()
        self.root = Path(root)
        self.user, self.password = user, password
        self.port = harness.free_port()
        self.log = AccessLog(self.workdir / "access.log")
        self.error_log = self.workdir / "error.log"
        self.tls = tls
        # With tls, a self-signed certificate for 127.0.0.1: the mount's --cacert.
        self.cert = self.workdir / "cert.pem"

    def url(self, area, rel="", *, user=None, password=None):
        auth = f"{user}:{password}@" if user is not None else ""
        return f"{'davs' if self.tls else 'dav'}://{auth}127.0.0.1:{self.port}/{area}/{rel}"

    def _tls_config(self):
        if not self.tls:
            return ""
        key = self.workdir / "key.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-keyout", str(key), "-out", str(self.cert), "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        return f"""
LoadModule socache_shmcb_module {MODULES}/mod_socache_shmcb.so
LoadModule ssl_module {MODULES}/mod_ssl.so
SSLEngine on
SSLCertificateFile "{self.cert}"
SSLCertificateKeyFile "{key}"
"""

    def _write_config(self):
        sha = base64.b64encode(hashlib.sha1(self.password.encode()).digest()).decode()
        (self.workdir / "basic.pw").write_text(f"{self.user}:{{SHA}}{sha}\n")
        ha1 = hashlib.md5(f"{self.user}:{REALM}:{self.password}".encode()).hexdigest()
        (self.workdir / "digest.pw").write_text(f"{self.user}:{REALM}:{ha1}\n")
        for name in ("basic.pw", "digest.pw"):
            (self.workdir / name).chmod(0o644)
        modules = ["mpm_event", "authn_core", "authn_file", "authz_core", "authz_user", "auth_basic",
                   "auth_digest", "alias", "mime", "dav", "dav_fs"]
        loads = "\n".join(f"LoadModule {m}_module {MODULES}/mod_{m}.so" for m in modules)
        areas = "\n".join(f"Alias /{a}/ \"{self.root}/\"" for a in ("open", "basic", "digest"))
        w = self.workdir
        conf = f"""
ServerRoot "{w}"
ServerName 127.0.0.1
Listen 127.0.0.1:{self.port}
PidFile "{w}/httpd.pid"
DefaultRuntimeDir "{w}"
Mutex file:{w} default
ErrorLog "{w}/error.log"
LogLevel warn
User www-data
Group www-data
{loads}
{self._tls_config()}
TypesConfig /etc/mime.types
LogFormat "%m\\t%U\\t%>s\\t%u\\t%{{begin:usec}}t\\t%{{Depth}}i" dav
CustomLog "{w}/access.log" dav
DavLockDB "{w}/davlock"
KeepAlive On
MaxKeepAliveRequests 0
DocumentRoot "{self.root}"
{areas}
<Directory "{self.root}">
    DAV On
    Require all granted
</Directory>
<Location /basic/>
    AuthType Basic
    AuthName "{REALM}"
    AuthBasicProvider file
    AuthUserFile "{w}/basic.pw"
    Require valid-user
</Location>
<Location /digest/>
    AuthType Digest
    AuthName "{REALM}"
    AuthDigestDomain /digest/
    AuthDigestProvider file
    AuthUserFile "{w}/digest.pw"
    Require valid-user
</Location>
"""
        (w / "httpd.conf").write_text(conf)
        # The lock database's directory is Apache's child's to write.
        shutil.chown(w, user="www-data")

    def start(self):
        self._write_config()
        self._start(["apache2", "-f", str(self.workdir / "httpd.conf"), "-DFOREGROUND"], "apache2")

    def remove(self):
        """Stops it and removes its dir (logs included)."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


WSGIDAV_MAIN = r'''
import sys
import time
from cheroot import wsgi
from wsgidav.wsgidav_app import WsgiDAVApp

root, port, log_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
app = WsgiDAVApp({
    "provider_mapping": {"/": root},
    "simple_dc": {"user_mapping": {"*": True}},
    "http_authenticator": {"accept_basic": False, "accept_digest": False, "default_to_digest": False},
    "verbose": 0,
    "logging": {"enable_loggers": []},
    "property_manager": None,
    "lock_storage": True,
    "dir_browser": {"enable": True},
})
log = open(log_path, "a", buffering=1)

def logged(environ, start_response):
    arrived = time.time_ns() // 1000
    def start(status, headers, exc_info=None):
        log.write(f"{environ['REQUEST_METHOD']}\t{environ.get('PATH_INFO', '')}\t{status.split()[0]}\t\t{arrived}\n")
        return start_response(status, headers, exc_info)
    return app(environ, start)

server = wsgi.Server(("127.0.0.1", port), logged, numthreads=4)
try:
    server.start()
except KeyboardInterrupt:
    server.stop()
'''


class WsgiDav(_Server):
    """wsgidav on cheroot serving `root` at /, every request logged."""

    def __init__(self, workdir, root):
        self.workdir = Path(workdir)
        self.root = Path(root)
        self.port = harness.free_port()
        self.log = AccessLog(self.workdir / "access.log")
        self.error_log = self.workdir / "wsgidav.stderr"

    def url(self, rel=""):
        return f"dav://127.0.0.1:{self.port}/{rel}"

    def start(self):
        script = self.workdir / "wsgidav_main.py"
        script.write_text(WSGIDAV_MAIN)
        self._start([sys.executable, str(script), str(self.root), str(self.port), str(self.log.path)], "wsgidav")
