"""nginx in the foreground (daemon off, no master process) from a config of
the caller's, on a port of the caller's, stopped by pid: the one place the
integration tests (conftest.Nginx) and the bench (bench/rig.py) start and
stop nginx. What the config says and how its access log reads stay with
each caller.

Standard library only: the bench imports it without pytest.
"""

import socket
import subprocess
import time
from pathlib import Path

KILL_TIMEOUT = 5.0   # seconds nginx has to exit on SIGTERM before SIGKILL


class NginxProcess:
    """`nginx -p WORKDIR -e ERROR_LOG -c CONF`; start() returns once `port`
    accepts connections. stop() is safe to call twice, or before start()."""

    def __init__(self, workdir, conf, error_log, port):
        self.workdir = Path(workdir)
        self.conf = Path(conf)
        self.error_log = Path(error_log)
        self.port = port
        self.proc = None

    def start(self, timeout=10.0, stderr_path=None):
        """nginx's own stderr goes to `stderr_path` when given (the bench
        keeps it beside its logs), else to a pipe read if nginx exits at
        start."""
        assert self.proc is None, "nginx already running"
        stderr = open(stderr_path, "w") if stderr_path else subprocess.PIPE
        try:
            self.proc = subprocess.Popen(
                ["nginx", "-p", str(self.workdir), "-e", str(self.error_log), "-c", str(self.conf)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        finally:
            if stderr_path:
                stderr.close()   # nginx holds its own copy
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                err = (self.proc.stderr.read().decode(errors="replace") if self.proc.stderr
                       else Path(stderr_path).read_text(errors="replace"))
                self.proc = None
                raise RuntimeError(f"nginx exited at start:\n{err}\n{self.error_log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"nginx not listening on {self.port} after {timeout}s")
                time.sleep(0.05)

    def stop(self):
        """SIGTERM at once (nginx runs until signalled: no wait for it to
        exit first), SIGKILL if it lingers; reaped."""
        if self.proc is not None:
            proc, self.proc = self.proc, None
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(KILL_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stderr:
                proc.stderr.close()

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None
