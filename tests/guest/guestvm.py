# SPDX-License-Identifier: GPL-2.0
"""A background QEMU guest (TCG) we can run shell commands in and drive through QMP.

Channels (all unix sockets in a private runtime folder):
  - ttyS0, the kernel console: the harness listens, QEMU connects; a thread drains it into
    <log_dir>/<name>.console.log and keeps the tail for error messages (an undrained console
    would stall the guest's printk);
  - ttyS1, the command channel: /init runs a loop that reads "RUN <id> <base64 script>" and
    answers "@@B <id>", base64 output, "@@E <id> <status>" (see guest_image.INIT_SCRIPT).
    Nothing else writes to ttyS1, so the markers cannot be interleaved with kernel messages;
  - QMP: QEMU listens, qmp.QMP connects.
Every wait has a deadline and also watches the QEMU process, so a guest that died (panic=-1
with -no-reboot makes QEMU exit) is reported at once with the console tail.
"""

from __future__ import annotations

import atexit
import base64
import ctypes
import dataclasses
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import guest_image
from qmp import QMP

QEMU = os.environ.get("VBALLOON_QEMU", "qemu-system-x86_64")
MIB = 1024 * 1024
GIB = 1024 * MIB
PAGE_BYTES = 4096
VIRTIO_ID_BALLOON = 0x0005
BALLOON_QOM_PATH = "/machine/peripheral/balloon0"
# The balloon's virtio device (x-query-virtio-queue-status takes it), inside its PCI proxy.
BALLOON_VIRTIO_PATH = BALLOON_QOM_PATH + "/virtio-backend"
# Queue indices on a device without free page hinting or reporting.
INFLATE_QUEUE, DEFLATE_QUEUE = 0, 1
# The PCIe root port a hot-pluggable balloon sits behind (q35's root bus is not hot-pluggable).
BALLOON_ROOT_PORT = "rp0"
# Inflating 1 GiB takes about 1 s with the in-tree driver under TCG; 60 s lets a much slower
# driver pass while still catching one that never gets there.
BALLOON_TIMEOUT_S = 60.0

# no_timer_check: on a loaded host a TCG guest can miss the early IO-APIC timer check and
# panic ("IO-APIC + timer doesn't work!"); the check proves nothing about a virtual timer.
BASE_APPEND = "console=ttyS0 panic=-1 no_timer_check"
# init_on_alloc=0: Debian's CONFIG_INIT_ON_ALLOC_DEFAULT_ON would zero every page the balloon
# allocates (10-20x slower inflation under TCG) and every block a free page hint takes (which
# dirties it again).  Guests boot with it unless
# a test studies exactly that effect (GuestVM(init_on_alloc_off=False)).
INIT_ON_ALLOC_OFF = "init_on_alloc=0"
# QEMU 7.2's free-page-hint=on refuses to start without an iothread to poll the hint queue.
BALLOON_IOTHREAD = "balloon-io"


# Kernel taint flags, bit i = TAINT_LETTERS[i] (Documentation/admin-guide/tainted-kernels.rst).
TAINT_LETTERS = "PFSRMBUDAWCIOELKXTN"
# Loading an out-of-tree, unsigned module sets O (12) and E (13): expected.  Anything else
# (W warning, D oops, B bad page, L soft lockup, ...) means trouble.
TAINT_BAD = ~((1 << 12) | (1 << 13)) & ((1 << len(TAINT_LETTERS)) - 1)
KERNEL_TROUBLE = re.compile(r"WARNING:|BUG:|kernel BUG|Oops|Call Trace|soft lockup|"
                            r"general protection|Bad page|Kernel panic")


def taint_letters(mask: int) -> str:
    return "".join(c for i, c in enumerate(TAINT_LETTERS) if mask >> i & 1)


def kernel_trouble(console: str, context: int = 40) -> str:
    """The console from the first warning/oops line on (or its tail if there is none)."""
    lines = console.splitlines()
    for i, line in enumerate(lines):
        if KERNEL_TROUBLE.search(line):
            return "\n".join(lines[max(i - 2, 0):i + context])
    return "\n".join(lines[-context:])


def death_report(console: str, before: int = 30) -> str:
    """The lines leading to the last kernel panic, or the console's tail."""
    lines = console.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if "Kernel panic" in lines[i]:
            return "\n".join(lines[max(i - before, 0):i + 3])
    return "\n".join(lines[-before:])


class GuestError(RuntimeError):
    """The guest or QEMU misbehaved (died, timed out, refused to start)."""


@dataclasses.dataclass
class Driver:
    """A balloon driver the guest can load: the in-tree virtio_balloon or our vballoon."""
    label: str               # test id: "in-tree" or "vballoon"
    module: str              # name for rmmod / lsmod
    sysfs_name: str          # /sys/bus/virtio/drivers/<sysfs_name>
    insmod: list[str]        # guest paths, dependencies first
    params: str = ""         # module parameters for the last insmod


def intree_driver(img: guest_image.GuestImage) -> Driver:
    return Driver("in-tree", "virtio_balloon", "virtio_balloon", list(img.intree_modules))


def vballoon_driver(img: guest_image.GuestImage) -> Driver:
    return Driver("vballoon", "vballoon", "vballoon", list(img.vballoon_modules),
                  os.environ.get("VBALLOON_PARAMS", ""))


@dataclasses.dataclass
class CmdResult:
    status: int
    output: str


def _set_pdeathsig():
    # QEMU dies with the harness, even if the harness is killed: no stray guests.
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


# One host thread runs every vCPU, in turn. With QEMU 7.2's default multi-threaded TCG, a
# vCPU can go on running code another vCPU has just patched, so the kernel's live code
# patching (static keys, alternatives) breaks: Debian's 6.12 oopses on a stale int3 in
# patched code (at boot, and whenever a static key flips later, e.g. crng init), and 6.1
# stalls. tests/guest/test_harness.py flips a hot static key in a loop to show it.
TCG_ACCEL = "tcg,thread=single"


class GuestVM:
    def __init__(self, img: guest_image.GuestImage, *, name: str = "guest", ram_mib: int = 2048,
                 smp: int = 2, balloon_props: dict | None = None, append: str = "",
                 log_dir: str | None = None, init_on_alloc_off: bool = True,
                 extra_args: list[str] | None = None, hotpluggable_balloon: bool = False,
                 qemu: str | None = None, incoming: str | None = None):
        self.img = img
        self.qemu = qemu or QEMU  # the binary (tests/guest/test_patched_qemu.py: the patched one)
        # A migration stream to start from (-incoming URI) instead of a boot: start() then
        # waits for the load to complete and for the guest's command channel to answer.
        self.incoming = incoming
        self.name = name
        self.ram_bytes = ram_mib * MIB
        self.ram_mib = ram_mib
        self.smp = smp
        self.balloon_props = dict(balloon_props or {})
        self.append = " ".join(a for a in (BASE_APPEND, INIT_ON_ALLOC_OFF if init_on_alloc_off
                                           else "", append) if a)
        self.extra_args = list(extra_args or [])  # more QEMU options, e.g. -msg timestamp=on
        if self.balloon_props.get("free-page-hint") == "on":
            self.balloon_props.setdefault("iothread", BALLOON_IOTHREAD)
        # Behind a PCIe root port, so device_del can unplug it (the guest's pciehp does).
        self.hotpluggable_balloon = hotpluggable_balloon
        self.log_dir = log_dir or os.path.join(guest_image.work_dir(), "logs")
        self.console_log = os.path.join(self.log_dir, f"{name}.console.log")
        self.proc: subprocess.Popen | None = None
        self.qmp: QMP | None = None
        self.boot_seconds: float | None = None
        self.broken = False    # a command timed out: the channel may be out of step
        self._rundir = None
        self._cmd = None
        self._cmd_buf = b""
        self._cmd_id = 0
        self._console_tail = bytearray()
        self.console_bytes = 0     # how much the console has printed so far
        self._console_lock = threading.Lock()
        self._console_thread = None
        self.driver: Driver | None = None

    # -- life cycle ----------------------------------------------------------------------------

    def command_line(self) -> list[str]:
        props = "".join(f",{k}={v}" for k, v in self.balloon_props.items())
        port = []
        if self.hotpluggable_balloon:
            port = ["-device", f"pcie-root-port,id={BALLOON_ROOT_PORT},chassis=1,slot=1"]
            props += f",bus={BALLOON_ROOT_PORT}"
        r = self._rundir
        iothread = self.balloon_props.get("iothread")
        objects = ["-object", f"iothread,id={iothread}"] if iothread else []
        return [
            self.qemu, *objects, "-machine", "q35", "-accel", TCG_ACCEL, "-m", f"{self.ram_mib}M",
            "-smp", str(self.smp), "-nodefaults", "-no-user-config", "-display", "none",
            "-no-reboot", "-kernel", self.img.vmlinux, "-initrd", self.img.initramfs,
            "-append", self.append,
            "-chardev", f"socket,id=con,path={r}/console.sock",
            "-serial", "chardev:con",
            "-chardev", f"socket,id=cmd,path={r}/cmd.sock",
            "-serial", "chardev:cmd",
            "-qmp", f"unix:{r}/qmp.sock,server=on,wait=off",
        ] + port + ["-device", f"virtio-balloon-pci,id=balloon0{props}", *self.extra_args] + (
            ["-incoming", self.incoming] if self.incoming else [])

    def start(self, boot_timeout: float = 90.0, wait_incoming: bool = True) -> "GuestVM":
        """Boot, or with `incoming` start QEMU on the stream; wait_incoming=False returns as
        soon as QMP answers (a live destination, `-incoming defer`: the caller sets it up,
        runs migrate-incoming and waits for the stream itself)."""
        if shutil.which(self.qemu) is None:
            raise GuestError(f"{self.qemu} not found: run ci/install-deps.sh (qemu-system-x86)")
        os.makedirs(self.log_dir, exist_ok=True)
        # Unix socket paths are limited to 108 bytes: keep them short, under /tmp.
        self._rundir = tempfile.mkdtemp(prefix="vbguest-")
        atexit.register(self.stop)  # a script that forgets stop() leaves nothing behind
        listeners = {}
        for ch in ("console", "cmd"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(os.path.join(self._rundir, f"{ch}.sock"))
            s.listen(1)
            listeners[ch] = s
        t0 = time.monotonic()
        self._stderr = open(os.path.join(self.log_dir, f"{self.name}.qemu.log"), "w+")
        try:
            self.proc = subprocess.Popen(self.command_line(), stdin=subprocess.DEVNULL,
                                         stdout=self._stderr, stderr=subprocess.STDOUT,
                                         preexec_fn=_set_pdeathsig)
        except OSError as e:
            raise GuestError(f"cannot start {self.qemu}: {e}") from e
        try:
            deadline = t0 + boot_timeout
            conns = {}
            for ch, s in listeners.items():
                while True:
                    r, _, _ = select.select([s], [], [], 0.2)
                    if r:
                        conns[ch], _ = s.accept()
                        break
                    self._check_alive(f"connecting the {ch} channel")
                    if time.monotonic() > deadline:
                        raise GuestError(f"QEMU did not connect its {ch} channel")
            for s in listeners.values():
                s.close()
            self._console = conns["console"]
            self._cmd = conns["cmd"]
            open(self.console_log, "w").close()
            self._console_thread = threading.Thread(target=self._drain_console, daemon=True)
            self._console_thread.start()
            self.qmp = QMP(os.path.join(self._rundir, "qmp.sock"),
                           connect_timeout=max(deadline - time.monotonic(), 1),
                           is_alive=lambda: self.proc.poll() is None)
            if self.incoming:
                if wait_incoming:
                    self._wait_incoming(deadline)
            else:
                self._wait_line(b"@@READY", deadline, "the guest's /init to come up")
            self.boot_seconds = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_incoming(self, deadline: float) -> None:
        """-incoming: the stream loaded and the guest running again (QEMU starts it itself),
        then the command channel answering (the guest's /init still waits on ttyS1)."""
        while True:
            status = self.qmp.query_migrate().get("status")
            running = self.qmp.execute("query-status").get("status") == "running"
            if status == "completed" and running:
                break
            if status == "failed":
                raise GuestError(f"[{self.name}] loading {self.incoming} failed:\n"
                                 f"{self._qemu_stderr()}")
            self._check_alive("loading the migration stream")
            if time.monotonic() > deadline:
                raise GuestError(f"[{self.name}] the migration stream did not load "
                                 f"(status {status})")
            time.sleep(0.05)  # poll interval, bounded by the deadline above
        self.resync()

    def stop(self) -> None:
        """Quit QEMU (QMP quit, then SIGKILL if it lingers) and remove the runtime folder."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                if self.qmp is not None:
                    self.qmp.execute("quit", timeout=5)
            except Exception:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.qmp is not None:
            self.qmp.close()
        for s in (self._cmd, getattr(self, "_console", None)):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass
        if self._console_thread is not None:
            self._console_thread.join(timeout=5)
        if getattr(self, "_stderr", None):
            self._stderr.close()
        if self._rundir and os.path.isdir(self._rundir):
            shutil.rmtree(self._rundir, ignore_errors=True)
        atexit.unregister(self.stop)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        return self.proc.pid

    # -- console -------------------------------------------------------------------------------

    def _drain_console(self):
        with open(self.console_log, "ab") as log:
            while True:
                try:
                    data = self._console.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                log.write(data)
                log.flush()
                with self._console_lock:
                    self.console_bytes += len(data)
                    self._console_tail += data
                    del self._console_tail[:-16384]

    def console_tail(self, lines: int = 40) -> str:
        with self._console_lock:
            text = self._console_tail.decode(errors="replace")
        return "\n".join(text.replace("\r", "").splitlines()[-lines:])

    def console_text(self, since: int = 0) -> str:
        """The console log from byte offset `since` (a value of console_bytes) on."""
        with open(self.console_log, "rb") as f:
            f.seek(since)
            return f.read().decode(errors="replace").replace("\r", "")

    def _qemu_stderr(self) -> str:
        try:
            self._stderr.flush()
            with open(self._stderr.name) as f:
                return f.read()[-4000:]
        except (OSError, ValueError):
            return ""

    def _check_alive(self, doing: str):
        if self.proc is not None and self.proc.poll() is not None:
            raise GuestError(
                f"[{self.name}] QEMU exited (status {self.proc.returncode}) while {doing}.\n"
                f"QEMU said:\n{self._qemu_stderr()}\n"
                f"console ({self.console_log}):\n{death_report(self.console_text())}")

    # -- command channel -----------------------------------------------------------------------

    def _read_cmd_line(self, deadline: float, doing: str) -> bytes:
        while b"\n" not in self._cmd_buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.broken = True
                raise GuestError(f"[{self.name}] timed out {doing}.\n"
                                 f"console tail ({self.console_log}):\n{self.console_tail()}")
            r, _, _ = select.select([self._cmd], [], [], min(left, 0.5))
            if r:
                chunk = self._cmd.recv(65536)
                if not chunk:
                    # QEMU closes its sockets as it exits: give it a moment to be reaped so
                    # the error says why (exit status, console tail with the panic).
                    try:
                        self.proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        pass
                    self._check_alive(doing)
                    raise GuestError(f"[{self.name}] command channel closed while {doing}.\n"
                                     f"console tail:\n{self.console_tail()}")
                self._cmd_buf += chunk
            else:
                self._check_alive(doing)
        line, _, self._cmd_buf = self._cmd_buf.partition(b"\n")
        return line.rstrip(b"\r")

    def _wait_line(self, want: bytes, deadline: float, doing: str):
        while self._read_cmd_line(deadline, f"waiting for {doing}") != want:
            pass

    def run(self, script: str, timeout: float = 60.0, check: bool = True) -> CmdResult:
        """Run a shell script in the guest; returns its exit status and stdout+stderr."""
        if self.broken:
            raise GuestError(f"[{self.name}] an earlier command timed out; guest not usable")
        self._check_alive(f"starting {script!r}")
        console0 = self.console_bytes
        self._cmd_id += 1
        cid = self._cmd_id
        payload = base64.b64encode(script.encode()).decode()
        self._cmd.sendall(f"RUN {cid} {payload}\n".encode())
        deadline = time.monotonic() + timeout
        doing = f"running {script!r} (timeout {timeout} s)"
        self._wait_line(f"@@B {cid}".encode(), deadline, doing)
        body = []
        while True:
            line = self._read_cmd_line(deadline, doing)
            m = re.fullmatch(rb"@@E (\d+) (\d+)", line)
            if m and int(m.group(1)) == cid:
                status = int(m.group(2))
                break
            body.append(line)
        out = base64.b64decode(b"".join(body)).decode(errors="replace")
        res = CmdResult(status, out)
        if check and status != 0:
            console = self.console_text(console0)
            trouble = (f"\nkernel console meanwhile:\n{kernel_trouble(console)}"
                       if KERNEL_TROUBLE.search(console) else "")
            raise GuestError(f"[{self.name}] {script!r} exited {status}:\n{out}{trouble}")
        return res

    def sh(self, script: str, timeout: float = 60.0) -> str:
        """Run a script that must succeed; returns its output."""
        return self.run(script, timeout=timeout, check=True).output

    def resync(self, attempts: int = 6, timeout: float = 10.0) -> None:
        """After a resume from suspend the guest's UART may drop the first bytes it gets, so a
        command can be lost: nudge the channel with a newline and a ping until one answers."""
        for _ in range(attempts):
            self.broken = False
            self._cmd_buf = b""
            self._cmd.sendall(b"\n")
            try:
                if self.run("echo resync", timeout=timeout).output.strip() == "resync":
                    return
            except GuestError:
                pass
        self.broken = True
        raise GuestError(f"[{self.name}] the command channel did not answer after "
                         f"{attempts} tries.\nconsole tail:\n{self.console_tail()}")

    def wait_rebooted(self, timeout: float = 90.0) -> None:
        """After a machine reset: wait until the new kernel's /init is up on the command
        channel (the chardev sockets stay connected across the reset)."""
        self._cmd_buf = b""
        self._wait_line(b"@@READY", time.monotonic() + timeout, "the guest to boot again")
        self.driver = None

    # -- guest facts ---------------------------------------------------------------------------

    def meminfo(self) -> dict[str, int]:
        """/proc/meminfo in kB (and counts for the few fields without a unit)."""
        vals = {}
        for line in self.sh("cat /proc/meminfo").splitlines():
            k, _, v = line.partition(":")
            vals[k.strip()] = int(v.split()[0])
        return vals

    def free_kib(self) -> int:
        """Free memory in KiB, counting the per-CPU page lists that MemFree leaves out.

        MemFree (NR_FREE_PAGES) moves by tens of MiB as pages go in and out of the per-CPU
        lists (up to ~27 MiB per CPU in a 2 GiB guest); free + per-CPU counts from
        /proc/zoneinfo is stable to a few hundred KiB on an idle guest.
        """
        z = self.sh("cat /proc/zoneinfo")
        free = sum(int(v) for v in re.findall(r"^\s+nr_free_pages\s+(\d+)", z, re.M))
        pcp = sum(int(v) for v in re.findall(r"^\s+count:\s+(\d+)", z, re.M))
        return (free + pcp) * PAGE_BYTES // 1024

    def balloon_device(self) -> str:
        """sysfs name of the virtio device whose id is the balloon's (e.g. "virtio0")."""
        out = self.sh("for d in /sys/bus/virtio/devices/*; do echo $d $(cat $d/device); done")
        found = [os.path.basename(line.split()[0]) for line in out.splitlines()
                 if int(line.split()[1], 16) == VIRTIO_ID_BALLOON]
        if len(found) != 1:
            raise GuestError(f"[{self.name}] expected one virtio balloon device, found:\n{out}")
        return found[0]

    def vballoon_counters(self) -> dict[str, int]:
        """vballoon's debugfs counters for the balloon device (vballoon must be bound)."""
        out = self.sh(f"cat /sys/kernel/debug/vballoon/{self.balloon_device()}/counters")
        return {k: int(v, 0) for k, v in (line.split() for line in out.splitlines())}

    def bound_driver(self) -> str | None:
        dev = self.balloon_device()
        out = self.run(f"readlink /sys/bus/virtio/devices/{dev}/driver", check=False)
        return os.path.basename(out.output.strip()) if out.status == 0 else None

    def negotiated_features(self) -> int:
        """Feature bits the driver accepted (the sysfs "features" file: one char per bit)."""
        bits = self.sh(f"cat /sys/bus/virtio/devices/{self.balloon_device()}/features").strip()
        return sum(1 << i for i, c in enumerate(bits) if c == "1")

    def vmstat(self) -> dict[str, int]:
        return {k: int(v) for k, v in
                (line.split() for line in self.sh("cat /proc/vmstat").splitlines())}

    def balloon_queue_status(self, queue: int) -> dict:
        """QEMU's view of one of the balloon's virtqueues (used-idx, last-avail-idx, ...)."""
        return self.qmp.execute("x-query-virtio-queue-status",
                                {"path": BALLOON_VIRTIO_PATH, "queue": queue})

    def taint(self) -> int:
        return int(self.sh("cat /proc/sys/kernel/tainted").strip())

    def loaded_modules(self) -> set[str]:
        return {line.split()[0] for line in self.sh("cat /proc/modules").splitlines()}

    def load_driver(self, drv: Driver, timeout: float = 60.0) -> None:
        """insmod the driver (and its dependencies) and wait until it is bound to the device."""
        loaded = self.loaded_modules()
        script = []
        for i, path in enumerate(drv.insmod):
            mod = os.path.basename(path).split(".ko")[0].replace("-", "_")
            if mod in loaded:
                continue
            params = f" {drv.params}" if i == len(drv.insmod) - 1 and drv.params else ""
            script.append(f"insmod {path}{params}")
        if script:
            self.sh(" && ".join(script), timeout=timeout)
        self.wait_bound(drv, timeout)
        self.driver = drv

    def wait_bound(self, drv: Driver, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.bound_driver() != drv.sysfs_name:
            if time.monotonic() > deadline:
                raise GuestError(f"[{self.name}] {drv.sysfs_name} did not bind to the balloon "
                                 f"device within {timeout} s.\nconsole:\n{self.console_tail()}")
            time.sleep(0.05)  # poll interval, bounded by the deadline above

    def unload_driver(self, drv: Driver, timeout: float = 120.0) -> None:
        self.sh(f"rmmod {drv.module}", timeout=timeout)
        self.driver = None

    def qemu_rss_bytes(self) -> int:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise GuestError("no VmRSS in /proc/<qemu>/status")
