"""A real FTP server for the FTP tests: pyftpdlib (PyPI), which no one here
wrote, run as a process of its own on loopback (`python3 ftpserver.py
ARGS`), plain, with explicit TLS (AUTH TLS) or with implicit TLS (`ftps://`:
TLS from the first byte, pyftpdlib's own TLS handler with its handshake
moved before the greeting), a self-signed certificate the client trusts
with --cacert, one user with a password, at most three
connections from one address (as FTP hosts allow a user), stopped by pid.

Its log, one line a command ("RETR", "REST", "MLSD", "PASS"…, never the
password itself) and one a connection, is what the tests count.
"""

import argparse
import logging
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import harness  # noqa: E402
from davservers import _stop, _wait_listening  # noqa: E402

MAX_PER_IP = 3


class FTPServer:
    def __init__(self, workdir, root, user="seed", password="ftp-Pa55", tls=False, mlsd=True, implicit=False):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.root, self.user, self.password, self.mlsd, self.implicit = Path(root), user, password, mlsd, implicit
        self.tls = tls or implicit
        self.port = harness.free_port()
        self.log = self.dir / "ftp.log"
        self.cert = self.dir / "cert.pem"
        self.key = self.dir / "key.pem"
        if self.tls:
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                            "-keyout", str(self.key), "-out", str(self.cert), "-subj", "/CN=127.0.0.1",
                            "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        self.proc = None

    def url(self, path="/", *, with_password=True, scheme="ftp"):
        who = self.user + (f":{self.password}" if with_password else "")
        return f"{scheme}://{who}@127.0.0.1:{self.port}{path}"

    def start(self):
        argv = [sys.executable, str(Path(__file__).resolve()), "--port", str(self.port), "--root", str(self.root),
                "--user", self.user, "--password", self.password, "--log", str(self.log)]
        if self.tls:
            argv += ["--cert", str(self.cert), "--key", str(self.key)]
        if self.implicit:
            argv.append("--implicit-tls")
        if not self.mlsd:
            argv.append("--no-mlsd")
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(self.dir / "stderr", "ab"))
        try:
            _wait_listening(self.proc, self.port, "pyftpdlib", self.dir / "stderr")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None

    def lines(self):
        return self.log.read_text(errors="replace").splitlines() if self.log.exists() else []

    def commands(self, verb):
        """Commands of one verb the server received, in order."""
        return [line for line in self.lines() if f" <- {verb}" in line]

    def connections(self):
        return sum(1 for line in self.lines() if "FTP session opened (connect)" in line)


def serve():
    from pyftpdlib.authorizers import DummyAuthorizer
    from pyftpdlib.handlers import FTPHandler, TLS_FTPHandler
    from pyftpdlib.servers import FTPServer as Server

    p = argparse.ArgumentParser()
    for name in ("--port", "--root", "--user", "--password", "--log"):
        p.add_argument(name, required=True)
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--no-mlsd", action="store_true", help="answer MLSD and MLST as unknown (500), as vsftpd does")
    p.add_argument("--implicit-tls", action="store_true", help="TLS from the first byte (ftps://), then the greeting")
    args = p.parse_args()
    logging.basicConfig(filename=args.log, level=logging.DEBUG, format="%(asctime)s %(message)s")
    authorizer = DummyAuthorizer()
    authorizer.add_user(args.user, args.password, args.root, perm="elr")
    if args.cert:
        handler = TLS_FTPHandler
        handler.certfile, handler.keyfile = args.cert, args.key
        handler.tls_control_required = handler.tls_data_required = True
        if args.implicit_tls:
            handler = type("ImplicitTLS", (handler,), {
                # The handshake first; the greeting (and on_connect) once
                # it is done, over TLS. USER and PASS are refused until then
                # (tls_control_required).
                "handle": lambda self: self.secure_connection(self.ssl_context),
                "handle_ssl_established": lambda self: TLS_FTPHandler.handle(self)})
    else:
        handler = FTPHandler
    if args.no_mlsd:
        handler = type("WithoutMLSD", (handler,), {"proto_cmds": {
            verb: spec for verb, spec in handler.proto_cmds.items() if verb not in ("MLSD", "MLST")}})
    handler.authorizer = authorizer
    handler.passive_ports = None
    handler.permit_foreign_addresses = False
    server = Server(("127.0.0.1", int(args.port)), handler)
    server.max_cons_per_ip = MAX_PER_IP
    server.serve_forever()


if __name__ == "__main__":
    serve()
