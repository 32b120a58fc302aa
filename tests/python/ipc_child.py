# SPDX-License-Identifier: Apache-2.0
"""One side of a handoff between processes for tests/python/test_ipc.py: `python ipc_child.py ROLE DEVICE N`.

It talks with the test in lines: what it reads from stdin (the test's word, or the other process's handle the test
passes on), what it prints on stdout ("handle <hex>", "queued <busy>", "value <first element>" ...). Roles:

- export-held: a tensor of N floats written with 0, then 42 on a stream a latch holds; exported on another stream
  (which waits for that write), closed at once; the latch opens when the test says "open".
- import-read: opens the device and says "ready"; then imports, copies the import into a tensor of its own on its
  stream, says whether that stream is still busy (it waits for the exporter's held write), then reads the copy.
- export-free: a tensor written with 42, exported and closed at once; on "reuse" it allocates and writes 7 into as
  many tensors of the same size as it can reuse (the freed memory comes back first, once it may).
- import-held: a latch holds its stream; imports, queues a copy of the import, closes the import (its close follows
  the copy, on the device); on "go" opens the latch and reads the copy.

A role waits for "exit" before it ends (an exporter must outlive its importer's use), unless it is an importer.
DLSTREAM_TEST_IPC_NO_WAIT=1 in its environment turns the ordering off (the negative controls).
"""
import os
import sys

import numpy as np

import dlstream


def say(*words):
    print(*words, flush=True)


def hear(want=None):
    line = sys.stdin.readline().split()
    if want is not None and (not line or line[0] != want):
        raise SystemExit(f"ipc_child: expected {want!r}, got {line!r}")
    return line


def first_value(t, device):
    host = np.zeros(t.shape, np.float32)
    dlstream.copy(host, t)
    return float(host[0])


def export_held(device, n):
    s, w = dlstream.Stream(device), dlstream.Stream(device)
    t = dlstream.empty(n, "float32", device=device, stream=s, ipc=True)
    dlstream.fill(t, 0.0, stream=s)
    s.synchronize()
    latch = dlstream.Latch(device)
    latch.wait(w, timeout=30.0)
    dlstream.fill(t, 42.0, stream=w)  # held until "open"
    say("handle", t.ipc_handle(stream=s).hex())  # s waits for w's write (the hazard rule), then the event
    t.close()  # at once: the memory waits for the importer's close
    hear("open")
    latch.open()
    dlstream.synchronize()
    latch.close()
    hear("exit")


def import_read(device, n):
    s = dlstream.Stream(device)  # the device opened (its code loaded) before the exporter holds its write
    say("ready")
    h = bytes.fromhex(hear("handle")[1])
    x = dlstream.from_ipc(h, stream=s)
    assert (x.shape, x.dtype, x.device) == ((n,), "float32", device), (x.shape, x.dtype, x.device)
    out = dlstream.empty(n, "float32", device=device, stream=s)
    dlstream.copy(out, x, stream=s)
    if os.environ.get("DLSTREAM_TEST_IPC_NO_WAIT") == "1":
        s.synchronize()  # nothing holds it: the copy ran, whatever it read
    say("queued", not s.query())
    s.synchronize()
    say("value", first_value(out, device))
    x.close()
    out.close()
    dlstream.synchronize()


def export_free(device, n):
    s = dlstream.Stream(device)
    t = dlstream.empty(n, "float32", device=device, stream=s, ipc=True)
    dlstream.fill(t, 42.0, stream=s)
    say("handle", t.ipc_handle(stream=s).hex())
    t.close()
    hear("reuse")
    s.synchronize()
    again = []
    for _ in range(8):
        u = dlstream.empty(n, "float32", device=device, stream=s, ipc=True)
        dlstream.fill(u, 7.0, stream=s)
        again.append(u)
    s.synchronize()
    say("reused", len(again))
    hear("exit")
    for u in again:
        u.close()


def import_held(device, n):
    h = bytes.fromhex(hear("handle")[1])
    s = dlstream.Stream(device)
    latch = dlstream.Latch(device)
    latch.wait(s, timeout=30.0)
    x = dlstream.from_ipc(h, stream=s)
    out = dlstream.empty(n, "float32", device=device, stream=s)
    dlstream.copy(out, x, stream=s)  # held
    x.close()  # the close's word is written after the copy, on s
    say("held")
    hear("go")
    latch.open()
    s.synchronize()
    say("value", first_value(out, device))
    out.close()
    latch.close()
    dlstream.synchronize()


ROLES = {"export-held": export_held, "import-read": import_read, "export-free": export_free,
         "import-held": import_held}

if __name__ == "__main__":
    role, dev, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ROLES[role](dev, count)
    leaks = {k: v for k, v in dlstream._dlstream._live_handles().items() if v}
    say("end", "leaks" if leaks else "clean", leaks or "")
