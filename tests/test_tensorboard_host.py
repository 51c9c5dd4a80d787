"""TensorBoard binds to 127.0.0.1 unless told otherwise, and the address reaches TensorBoard's own --host flag."""

from __future__ import annotations

from pathlib import Path

import hloscope.tensorboard.server as server_module
from hloscope.cli.tensorboard import command
from hloscope.tensorboard.server import TensorBoardProcess, is_loopback


def test_tensorboard_binds_loopback_unless_told():
    (host,) = [p for p in command.params if p.name == "host"]
    assert host.default == "127.0.0.1"
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("192.168.1.2")
    # the address reaches TensorBoard's own --host flag (TensorBoard alone would bind to localhost, or all with --bind_all)
    server = TensorBoardProcess(Path("/nonexistent"), host.default, 1, Path("/nonexistent.log"))
    assert server.url == "http://127.0.0.1:1/"


def test_tensorboard_command_line_carries_the_host(monkeypatch, tmp_path):
    seen = {}

    class FakePopen:
        def __init__(self, command, **kwargs):
            seen["command"] = command

    monkeypatch.setattr(server_module.subprocess, "Popen", FakePopen)
    server_module.TensorBoardProcess(tmp_path, "127.0.0.1", 6123, tmp_path / "tb.log").start()
    command = seen["command"]
    assert command[command.index("--host") + 1] == "127.0.0.1" and "--bind_all" not in command
