"""Start TensorBoard (with XProf's profile plugin) as a child process, wait until it answers, stop it."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import ipaddress
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from hloscope.errors import HloscopeError, MissingDependency

RUNS_PATH = "/data/plugin/profile/runs"


def check_installed() -> str:
    """TensorBoard's version, or MissingDependency naming the package that is absent."""
    if importlib.util.find_spec("tensorboard") is None:
        raise MissingDependency("tensorboard")
    plugins = {entry.name for entry in importlib.metadata.entry_points(group="tensorboard_plugins")}
    if "profile" not in plugins or importlib.util.find_spec("xprof") is None:
        raise MissingDependency("tensorboard-plugin-profile", "TensorBoard's profile plugin (XProf)")
    return importlib.metadata.version("tensorboard")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_host(host: str) -> str:
    """How a browser on this machine reaches a server bound to `host`."""
    if host in ("0.0.0.0", "::", ""):  # noqa: S104  # a wildcard bind the user asked for, reached on loopback
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


class TensorBoardProcess:
    """`tensorboard --logdir LOGDIR --host HOST --port PORT` in a child process, its output in `log_path`."""

    def __init__(self, logdir: Path, host: str, port: int, log_path: Path):
        self.logdir, self.host, self.port, self.log_path = logdir, host, port, log_path
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{url_host(self.host)}:{self.port}/"

    def start(self) -> None:
        command = [
            sys.executable, "-m", "tensorboard.main",
            "--logdir", str(self.logdir), "--host", self.host, "--port", str(self.port),
        ]  # fmt: skip
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)

    def _started(self) -> subprocess.Popen:
        if self.process is None:
            raise RuntimeError("TensorBoard has not been started (call start() first)")
        return self.process

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Poll the profile plugin's runs endpoint until it answers; fail with TensorBoard's last words if it exits."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy: it is local
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._started().poll() is not None:
                raise self.exit_error()
            try:
                with opener.open(self.url.rstrip("/") + RUNS_PATH, timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.25)
        raise HloscopeError(f"TensorBoard did not answer at {self.url} within {timeout_s:.0f} s (log: {self.log_path})")

    def wait(self, timeout_s: float) -> int | None:
        """Wait up to `timeout_s` for the child to exit; its exit code, or None while it still runs."""
        try:
            return self._started().wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace_s: float = 10.0) -> None:
        """Terminate the child, and kill it if it does not exit within `grace_s`."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=grace_s)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):  # slow to exit, or a second Ctrl-C: do not wait
            self.process.kill()
            self.process.wait()

    def exit_error(self) -> HloscopeError:
        """What to tell the user when TensorBoard exited on its own: its exit code and the last line it logged."""
        return HloscopeError(f"TensorBoard exited with code {self._started().returncode}: {self.last_log_line()}")

    def last_log_line(self) -> str:
        try:
            lines = [line.strip() for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return "(no log)"
        return lines[-1] if lines else "(no output)"
