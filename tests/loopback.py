"""Emulator processes on loopback ports: a free port, and waiting until one listens.

Shared by the emulator fixtures (bigtable_emulator.py, gcs_emulator.py).
"""

import socket
import subprocess
import time

__all__ = ["free_port", "wait_until_listening"]


def free_port() -> int:
    """A loopback port nothing listens on now (the emulator binds it right after)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_listening(port: int, process: subprocess.Popen, name: str,
                         seconds: float = 20) -> None:
    """Returns once 127.0.0.1:`port` accepts connections; RuntimeError naming `name`
    if the process exits first or the port stays closed for `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{name} did not listen on port {port} within {seconds} s")
