# SPDX-License-Identifier: GPL-2.0
"""A small QMP client of our own (Debian 12 packages no QMP library).

QMP is JSON, one object per line, over a unix socket: QEMU greets with {"QMP": ...}, the client
answers with qmp_capabilities, then each {"execute": ...} gets exactly one {"return": ...} or
{"error": ...}.  Asynchronous {"event": ...} lines (BALLOON_CHANGE, ...) may arrive at any time,
also between a command and its reply: they are kept in `events` for the caller, never mistaken
for replies.  Every read has a deadline.

Note for timing: QEMU rate-limits BALLOON_CHANGE to one per second (the latest value is sent
when the period ends), so "actual reached the target" is observed by polling query-balloon.
"""

from __future__ import annotations

import json
import select
import socket
import time


class QMPError(RuntimeError):
    """QEMU answered a command with an error."""

    def __init__(self, command: str, error: dict):
        super().__init__(f"QMP {command}: {error.get('class')}: {error.get('desc')}")
        self.error = error


class QMPTimeout(TimeoutError):
    pass


class QMPClosed(ConnectionError):
    pass


class QMP:
    def __init__(self, path: str, connect_timeout: float = 10.0, is_alive=None):
        """Connect to QEMU's QMP server socket and negotiate capabilities.

        `is_alive` (optional callable) lets the connect loop give up at once if QEMU exited.
        """
        self.path = path
        self.events: list[dict] = []
        self._buf = b""
        self._id = 0
        deadline = time.monotonic() + connect_timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                s.close()
                if is_alive is not None and not is_alive():
                    raise QMPClosed(f"QEMU exited before its QMP socket {path} accepted")
                if time.monotonic() > deadline:
                    raise QMPTimeout(f"QMP socket {path} not accepting after {connect_timeout} s")
                time.sleep(0.02)  # retry interval of a connect poll, bounded by the deadline
        self.sock = s
        greeting = self._read_message(deadline - time.monotonic() + 5)
        if "QMP" not in greeting:
            raise QMPClosed(f"unexpected QMP greeting: {greeting}")
        self.greeting = greeting
        self.execute("qmp_capabilities")

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    # -- low level -----------------------------------------------------------------------------

    def _read_message(self, timeout: float) -> dict:
        deadline = time.monotonic() + max(timeout, 0)
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise QMPTimeout(f"no QMP message within {timeout:.1f} s")
            r, _, _ = select.select([self.sock], [], [], left)
            if not r:
                continue
            chunk = self.sock.recv(65536)
            if not chunk:
                raise QMPClosed("QMP connection closed by QEMU")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        line = line.strip()
        if not line:
            return self._read_message(deadline - time.monotonic())
        return json.loads(line)

    def _take(self, msg: dict) -> dict | None:
        """Keep events; return anything else."""
        if "event" in msg:
            msg["_received"] = time.monotonic()
            self.events.append(msg)
            return None
        return msg

    # -- commands ------------------------------------------------------------------------------

    def execute(self, command: str, arguments: dict | None = None, timeout: float = 30.0):
        """Run one command; returns its "return" value or raises QMPError."""
        self._id += 1
        req = {"execute": command, "id": self._id}
        if arguments:
            req["arguments"] = arguments
        self.sock.sendall(json.dumps(req).encode() + b"\n")
        deadline = time.monotonic() + timeout
        while True:
            msg = self._take(self._read_message(deadline - time.monotonic()))
            if msg is None:
                continue
            if msg.get("id") != self._id:
                continue  # a late reply to an earlier command that timed out
            if "error" in msg:
                raise QMPError(command, msg["error"])
            return msg.get("return")

    def poll_events(self) -> None:
        """Move every event already on the socket into `events` (does not block)."""
        while True:
            if b"\n" not in self._buf:
                r, _, _ = select.select([self.sock], [], [], 0)
                if not r:
                    return
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise QMPClosed("QMP connection closed by QEMU")
                self._buf += chunk
                continue
            line, _, self._buf = self._buf.partition(b"\n")
            if line.strip():
                self._take(json.loads(line))

    def wait_event(self, name: str, timeout: float, predicate=None, start: int = 0) -> dict:
        """First event called `name` (matching `predicate`) at index >= start in `events`,
        waiting for it up to `timeout` seconds."""
        deadline = time.monotonic() + timeout
        i = start
        while True:
            while i < len(self.events):
                ev = self.events[i]
                i += 1
                if ev["event"] == name and (predicate is None or predicate(ev)):
                    return ev
            left = deadline - time.monotonic()
            if left <= 0:
                raise QMPTimeout(f"no {name} event within {timeout} s")
            msg = self._read_message(left)
            self._take(msg)

    def events_named(self, name: str, start: int = 0) -> list[dict]:
        self.poll_events()
        return [e for e in self.events[start:] if e["event"] == name]

    # -- balloon helpers -----------------------------------------------------------------------

    def balloon(self, target_bytes: int) -> None:
        self.execute("balloon", {"value": int(target_bytes)})

    def balloon_actual(self) -> int:
        return int(self.execute("query-balloon")["actual"])

    def wait_balloon(self, target_bytes: int, timeout: float, interval: float = 0.05) -> float:
        """Poll query-balloon until actual == target; returns the seconds it took."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        last = None
        while True:
            last = self.balloon_actual()
            now = time.monotonic()
            if last == target_bytes:
                return now - t0
            if now > deadline:
                raise QMPTimeout(f"balloon actual {last} != target {target_bytes} "
                                 f"after {timeout} s")
            time.sleep(interval)  # poll interval, bounded by the deadline above

    def qom_get(self, path: str, prop: str):
        return self.execute("qom-get", {"path": path, "property": prop})

    def qom_set(self, path: str, prop: str, value) -> None:
        self.execute("qom-set", {"path": path, "property": prop, "value": value})

    # -- migration helpers ---------------------------------------------------------------------

    def migrate_set_parameters(self, **params) -> None:
        """migrate-set-parameters; Python names with "_" become QMP's "-" names."""
        self.execute("migrate-set-parameters",
                     {k.replace("_", "-"): v for k, v in params.items()})

    def migrate(self, uri: str) -> None:
        """Start an outgoing migration; returns at once (poll query_migrate)."""
        self.execute("migrate", {"uri": uri})

    def query_migrate(self) -> dict:
        return self.execute("query-migrate")

    def wait_migration(self, timeout: float, interval: float = 0.05) -> dict:
        """Poll query-migrate until the migration completed and the VM has left the
        finish-migrate run state; returns query-migrate's final answer. Raises if it failed
        or was cancelled, or did not finish within `timeout` s.

        QEMU reports "completed" from the migration thread before a bottom half under the
        BQL moves the VM from finish-migrate to postmigrate, and refuses `cont` until it has
        ("Migration is not finalized yet"): on a loaded host that window is long enough to
        hit."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.query_migrate()
            status = info.get("status")
            if status == "completed" and \
                    self.execute("query-status").get("status") != "finish-migrate":
                return info
            if status in ("failed", "cancelled"):
                raise QMPError("migrate", {"class": status,
                                           "desc": info.get("error-desc", str(info))})
            if time.monotonic() > deadline:
                raise QMPTimeout(f"migration not completed after {timeout} s: {info}")
            time.sleep(interval)  # poll interval, bounded by the deadline above
