"""A FUSE server killed while one of its own threads waits on its own mount (seen once after a
`kill -9` of a twin run: the simulator's daemon was attaching a loop device to its image) stays a
zombie with that thread stuck for ever, holding /dev/fuse, and every later touch of its loop
device hangs (here: `losetup -j` of the next test). `fuse.abort` (used by `rig clean-sim`) ends
the wait, so the process finishes exiting. The server is the simulator's own FUSE code, in a
child process; a read of its file that the server never answers makes the wait."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures.simssd import fuse, runtime

REPO = Path(__file__).resolve().parents[2]

SERVER = """
import os, sys, threading, time
from fixtures.simssd.fuse import FuseServer

class NeverAnswers:
    def size(self): return 1 << 20
    def open(self): return 0
    def read(self, handle, offset, size):
        print("read taken", flush=True)
        threading.Event().wait()  # a worker holds the request: the kernel has sent it
    def write(self, handle, offset, data): pass
    def fsync(self, handle): pass
    def release(self, handle): pass

where = sys.argv[1]
server = FuseServer(where, {"disk.img": NeverAnswers()}, name="aborttest", workers=2)
def own_read():
    with open(os.path.join(where, "disk.img"), "rb", buffering=0) as handle:
        handle.read(4096)
threading.Thread(target=own_read, daemon=True).start()
time.sleep(600)
"""


pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/dev/fuse"), reason="needs root and /dev/fuse"
)


def test_abort_lets_a_server_stuck_on_its_own_mount_exit(tmp_path: Path) -> None:
    where = tmp_path / "mnt"
    where.mkdir()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(where)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "read taken"
        server.send_signal(signal.SIGKILL)
        time.sleep(1.0)
        # the deadlock: the main thread is gone, the reading thread is not, and cannot be
        assert server.poll() is None
        assert not runtime.alive(server.pid) and not runtime.exited(server.pid)
        assert fuse.abort(str(where))
        assert runtime.wait_exited(server.pid, 10), "still stuck after the abort"
        assert server.wait(10) == -signal.SIGKILL
    finally:
        if server.poll() is None:
            fuse.abort(str(where))
            server.kill()
            server.wait(10)
        fuse.unmount(str(where))
    assert not fuse.abort(str(where))  # no FUSE mount there any more


def test_abort_of_a_path_that_is_no_fuse_mount_does_nothing(tmp_path: Path) -> None:
    assert not fuse.abort(str(tmp_path))
    assert not fuse.abort("/")
