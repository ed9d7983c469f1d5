"""QEMU guests for the kernel tools: the human monitor (HMP) over its socket,
a line to a chardev socket, and a guest booted under TCG that is waited on by
the markers its init prints on the serial console."""
import os
import signal
import socket
import subprocess
import time

from .common import Fail, wait_until


def _until_prompt(s):
    buf = b""
    while not buf.endswith(b"(qemu) "):
        d = s.recv(65536)
        if not d:
            break
        buf += d
    return buf


def monitor(path, cmds, timeout=120):
    """Runs each HMP command in turn; fails on the first that answers an
    error. `quit` waits until QEMU closes the monitor (closing first can lose
    the quit)."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.settimeout(timeout)
    _until_prompt(s)
    try:
        for cmd in cmds:
            s.sendall(cmd.encode() + b"\n")
            if cmd == "quit":
                try:
                    while s.recv(65536):
                        pass
                except OSError:
                    pass
                return
            out = _until_prompt(s).decode(errors="replace")
            if "rror" in out:
                raise Fail(f"qemu monitor: {cmd}: {out}", 4)
    finally:
        s.close()


def send_line(path, text):
    """Writes TEXT and a newline to a chardev socket (a guest's serial port)."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(text.encode() + b"\n")
    s.close()


class Guest:
    """A guest started with `argv` (QEMU's command line), its console in
    `serial`. Killed when the `with` block leaves, whatever happened."""

    def __init__(self, argv, serial, log):
        self.argv, self.serial, self.log = argv, serial, log
        self.proc = None
        self.started = 0.0

    def __enter__(self):
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        return False

    def alive(self):
        return self.proc.poll() is None

    def console(self):
        try:
            with open(self.serial, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def tail(self, n=30):
        return "\n".join(self.console().splitlines()[-n:])

    def wait_for(self, marker, timeout, what):
        """Waits for a console line holding `marker`; Fail (status 4) with the
        console's tail when QEMU exits or `timeout` passes first."""
        ok = wait_until(lambda: marker in self.console(), timeout, alive=self.alive)
        if not ok:
            why = "QEMU exited early" if not self.alive() else f"{what} after {timeout} s"
            raise Fail(f"{why}\n{self.tail()}", 4)
        return time.monotonic() - self.started

    def finish(self, grace=30):
        """After a monitor `quit`: QEMU gets `grace` s to exit, then is killed
        (the dumps were complete once the monitor answered), so a lost quit
        never hangs the caller."""
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.log("QEMU did not quit; killed it (the dumps were complete)")


def remove(*paths):
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
