#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Prepare what a test guest boots: an ELF vmlinux and a busybox initramfs.

The guest kernel is Debian's own image of the same version as the installed
linux-headers-amd64 (the headers vballoon.ko is built against), so our module and the
in-tree virtio_balloon run in exactly the kernel they were built for.

Steps, each cached in the work folder (default tests/guest/.work, or $VBALLOON_GUEST_WORK):
  1. the kernel version: newest /usr/src/linux-headers-*-amd64 (or $VBALLOON_KVER, or the
     version in $VBALLOON_KDIR's name);
  2. `apt-get download linux-image-<ver>` and `dpkg -x` it (kept per version), with the
     machine's apt, or with ci/debian-apt.sh trixie|testing for headers
     ci/install-kernel.sh took from Debian 13 or testing (their .vballoon-unpacked says
     which); on 7.x linux-image-<ver> is a meta package and its linux-binary, linux-modules
     and linux-base packages are unpacked;
  3. the ELF vmlinux, decompressed from the XZ or zstd stream inside the bzImage (an ELF
     boots through PVH and skips 3-7 s of in-guest decompression under TCG);
  4. `depmod` on the unpacked modules, whose modules.dep gives the load order;
  5. a static memory hog (hog.c) and the migration workloads (vbwork.c with the simulator's
     own generator, device-sim/migration/workload_generator.c) built with `gcc -static`,
     keyed by their sources' hash;
  6. a gzip'd newc initramfs: busybox-static, /init, the virtio modules not built in, the in-tree
     virtio_balloon.ko, the hog, vbwork and, when given, vballoon.ko; keyed by the hash of everything
     that goes in, so a rebuilt vballoon.ko gives a new image and an unchanged one is reused.

Run as a script to prepare (and print) the paths:
  python3 tests/guest/guest_image.py [--vballoon-ko PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import gzip
import hashlib
import io
import struct
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_WORK = os.path.join(HERE, ".work")

# Base virtio transport for a virtio-pci device, in the order they must load.  The order is
# recomputed from modules.dep below; this list only names what the guest needs.
VIRTIO_BASE_MODULES = ["virtio", "virtio_ring", "virtio_pci_modern_dev",
                       "virtio_pci_legacy_dev", "virtio_pci"]
INTREE_BALLOON_MODULE = "virtio_balloon"
# A data disk for workloads that need evictable, re-readable file pages (the root is an
# initramfs, whose pages are never evicted): loaded on demand (GuestImage.blk_modules).
BLK_MODULES = ["virtio_blk"]

# Where vballoon.ko goes inside the guest (insmod takes a path, so modules.dep need not know it).
GUEST_VBALLOON_KO = "/lib/modules/vballoon.ko"

XZ_MAGIC = b"\xfd7zXZ\x00"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ELF_MAGIC = b"\x7fELF"


class ImageError(RuntimeError):
    """Preparing the guest failed; the message says what to do."""


def work_dir() -> str:
    return os.environ.get("VBALLOON_GUEST_WORK", DEFAULT_WORK)


def _version_key(ver: str):
    return [int(p) if p.isdigit() else p for p in re.split(r"[.-]", ver)]


def headers_kernel_version() -> str:
    """The kernel version of the installed amd64 headers (what vballoon.ko is built against)."""
    forced = os.environ.get("VBALLOON_KVER")
    if forced:
        return forced
    kdir = os.environ.get("VBALLOON_KDIR")
    if kdir:
        m = re.fullmatch(r"linux-headers-(.+-amd64)", os.path.basename(kdir.rstrip("/")))
        if not m:
            raise ImageError(f"VBALLOON_KDIR={kdir} is not a linux-headers-<version>-amd64 folder")
        return m.group(1)
    found = []
    for d in glob.glob("/usr/src/linux-headers-*-amd64"):
        m = re.fullmatch(r"linux-headers-(.+-amd64)", os.path.basename(d))
        if m and os.path.isfile(os.path.join(d, "Makefile")):
            found.append(m.group(1))
    if not found:
        # Fall back to the metapackage's dependency, as dpkg sees it.
        try:
            out = subprocess.run(["dpkg-query", "-W", "-f=${Depends}", "linux-headers-amd64"],
                                 check=True, capture_output=True, text=True).stdout
            m = re.search(r"linux-headers-(\S+-amd64)", out)
            if m:
                found.append(m.group(1))
        except (OSError, subprocess.CalledProcessError):
            pass
    if not found:
        raise ImageError("no /usr/src/linux-headers-*-amd64 found: run ci/install-deps.sh "
                         "(it installs linux-headers-amd64)")
    return max(found, key=_version_key)


def headers_dir(kver: str) -> str:
    """The headers vballoon.ko is built against: $VBALLOON_KDIR (a tree unpacked elsewhere,
    e.g. by ci/install-kernel.sh), else the installed package's folder."""
    return os.environ.get("VBALLOON_KDIR") or f"/usr/src/linux-headers-{kver}"


# Where ci/install-kernel.sh unpacks headers, and its record of where they came from.
KERNELS_DIR = "/var/cache/vballoon/kernels"
HEADERS_STAMP = ".vballoon-unpacked"
DEBIAN_APT = os.path.join(REPO_ROOT, "ci", "debian-apt.sh")


def headers_record(kver: str) -> dict[str, str]:
    """What ci/install-kernel.sh wrote into the headers tree of kver ($VBALLOON_KDIR, else a
    tree under $VB_KERNELS or /var/cache/vballoon/kernels): `apt` (host, trixie or testing:
    which apt has the matching image) and `version`. Empty for installed headers and for trees
    unpacked before the file said anything, which came from the machine's apt."""
    name = f"linux-headers-{kver}"
    dirs = []
    kdir = os.environ.get("VBALLOON_KDIR")
    if kdir and os.path.basename(kdir.rstrip("/")) == name:
        dirs.append(kdir)
    base = glob.escape(os.environ.get("VB_KERNELS", KERNELS_DIR))
    for depth in ("*", "*/*"):
        dirs += sorted(glob.glob(os.path.join(base, depth, "usr", "src", glob.escape(name))))
    for d in dirs:
        try:
            with open(os.path.join(d, HEADERS_STAMP)) as f:
                return dict(line.strip().split("=", 1) for line in f if "=" in line)
        except FileNotFoundError:
            continue
    return {}


def kernel_apt_origin(kver: str) -> str:
    """"host" (the machine's apt), "trixie" or "testing" (ci/debian-apt.sh with that suite):
    where kver's image is."""
    return headers_record(kver).get("apt", "host")


def build_hint(kver: str) -> str:
    """How to build vballoon.ko for kver, for error messages."""
    hdr = headers_dir(kver)
    origin = kernel_apt_origin(kver)
    if origin != "host":
        out = os.path.join(REPO_ROOT, "build-kmod", kver)
        built = {"trixie": "Debian 13 built these headers with gcc-14",
                 "testing": "Debian testing built these headers with gcc-16"}.get(
                     origin, f"{origin} built these headers")
        return (f"`{REPO_ROOT}/ci/in-{origin}-root.sh env KDIR={hdr} "
                f"{REPO_ROOT}/driver/linux/build-module.sh --out {out}` ({built}, which "
                f"Debian 12 lacks, and their kbuild tools need that release's glibc) and "
                f"VBALLOON_KO={out}/vballoon.ko")
    # A test build (VB_TEST_HOOKS=1): the suite's fault-injection knobs are in no other.
    return f"`KDIR={hdr} {REPO_ROOT}/driver/linux/build-module.sh`"


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _run(cmd, **kw):
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)
    except FileNotFoundError as e:
        raise ImageError(f"{cmd[0]} is not installed: run ci/install-deps.sh") from e
    except subprocess.CalledProcessError as e:
        raise ImageError(f"{' '.join(cmd)} failed (exit {e.returncode}):\n"
                         f"{e.stdout}{e.stderr}") from e


def _atomic_write(path: str, data: bytes, mode: int = 0o644) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ----------------------------------------------------------------------------------------------
# Kernel: download, unpack, vmlinux, depmod


def _apt(origin: str, tool: str) -> list[str]:
    return [tool] if origin == "host" else [DEBIAN_APT, origin, tool]


def _download(alternatives: list[str], where: str, origin: str) -> list[str]:
    """apt-get download the first of alternatives (NAME or NAME=VERSION) apt has; its .deb
    files in where."""
    errors = []
    for spec in alternatives:
        name = spec.split("=")[0]
        try:
            # apt-get download writes into the current directory.
            _run(_apt(origin, "apt-get") + ["download", "-q", spec], cwd=where)
        except ImageError as e:
            errors.append(str(e))
            continue
        debs = glob.glob(os.path.join(glob.escape(where), f"{glob.escape(name)}_*.deb"))
        if not debs:
            raise ImageError(f"apt-get download {spec} produced no .deb in {where}")
        return debs
    raise ImageError("\n".join(errors))


def _cached(names: list[str], where: str) -> list[str]:
    for name in names:
        debs = glob.glob(os.path.join(glob.escape(where), f"{glob.escape(name)}_*.deb"))
        if debs:
            return debs
    return []


def _image_parts(deb: str, kver: str) -> list[str]:
    """NAME=VERSION of the packages a meta linux-image (7.x) depends on for the kernel
    itself: linux-binary-<kver> (vmlinuz), linux-modules-<kver>, linux-base-<kver> (config,
    modules.builtin). Pinned to the versions it names: parts of another build would not
    load into its kernel. Empty for an image that holds the kernel (6.1, 6.12)."""
    depends = _run(["dpkg-deb", "-f", deb, "Depends"]).stdout
    part = re.compile(rf"(linux-(?:binary|modules|base)-{re.escape(kver)})"
                      r"\s*(?:\(\s*=\s*([^)\s]+)\s*\))?")
    found = []
    for group in depends.split(","):
        m = part.fullmatch(group.strip())
        if m:
            found.append(f"{m.group(1)}={m.group(2)}" if m.group(2) else m.group(1))
    return found


def _kernel_debs(kver: str, where: str, origin: str) -> list[str]:
    """The .deb files that hold kver's kernel and modules, downloaded into where (cached)."""
    # The signed image (linux-signed-amd64) can lag a security release of the kernel by
    # days, while the headers and the unsigned image of the same build are out: the unsigned
    # package holds the same kernel and modules, and QEMU boots it directly. On 7.x the
    # signed part is linux-binary (linux-binary-unsigned beside it), under the meta package.
    image = [f"linux-image-{kver}", f"linux-image-{kver}-unsigned"]
    split = [[f"linux-binary-{kver}", f"linux-binary-unsigned-{kver}"],
             [f"linux-modules-{kver}"], [f"linux-base-{kver}"]]

    def fetch(alternatives: list[str]) -> list[str]:
        return (_cached([a.split("=")[0] for a in alternatives], where)
                or _download(alternatives, where, origin))

    def attempt() -> list[str]:
        try:
            debs = fetch(image)
        except ImageError as e:
            try:
                return [d for alternatives in split for d in fetch(alternatives)]
            except ImageError as e2:
                raise ImageError(f"{e}\n(nor the 7.x parts: {e2})") from None
        for spec in _image_parts(debs[0], kver):
            debs += fetch([spec])
        return debs

    try:
        return attempt()
    except ImageError as first:
        # Most often the package lists are missing or stale (a fresh container, or the
        # headers moved on): refresh them once if we may, then retry.
        if os.geteuid() != 0:
            raise ImageError(f"{first}\n(try `{' '.join(_apt(origin, 'apt-get'))} update` "
                             "first)") from None
        _run(_apt(origin, "apt-get") + ["update", "-qq" if origin == "host" else "-q"])
        return attempt()


def kernel_dir(kver: str, work: str) -> str:
    """The cache folder of kver's packages: per apt, since Debian 12 and 13 may one day
    build a kernel of the same version."""
    origin = kernel_apt_origin(kver)
    return os.path.join(work, "kernel", *([] if origin == "host" else [origin]), kver)


def unpack_kernel(kver: str, work: str) -> str:
    """Download and unpack kver's image; returns the unpacked root (cached), laid out as
    Debian 12's: modules in lib/modules/<kver>, the bzImage at boot/vmlinuz-<kver>."""
    kdir = kernel_dir(kver, work)
    root = os.path.join(kdir, "root")
    stamp = os.path.join(kdir, "unpacked.stamp")
    # `make M=<repo> clean` deletes every *.ko below the repository, this cache included:
    # check a module we need is still there, else unpack again (the .deb is kept).
    # (6.12's modules are xz-compressed: virtio_balloon.ko.xz)
    sentinel = os.path.join(glob.escape(root), "lib", "modules", glob.escape(kver), "kernel",
                            "drivers", "virtio", f"{INTREE_BALLOON_MODULE}.ko*")
    if os.path.exists(stamp) and glob.glob(sentinel):
        return root
    os.makedirs(kdir, exist_ok=True)
    debs = _kernel_debs(kver, kdir, kernel_apt_origin(kver))
    if os.path.isdir(root):
        shutil.rmtree(root)
    for deb in debs:
        _run(["dpkg", "-x", deb, root])
    # Debian 13's packages put modules (and on 7.x the bzImage, as lib/modules/<kver>/vmlinuz)
    # under usr/lib, which is /lib on a merged-/usr system: the same links here, so depmod
    # and every path below (and the tests' own) see one layout.
    if not os.path.lexists(os.path.join(root, "lib")):
        os.symlink("usr/lib", os.path.join(root, "lib"))
    bzimage = os.path.join(root, "boot", f"vmlinuz-{kver}")
    if not os.path.lexists(bzimage):
        if not os.path.isfile(os.path.join(root, "lib", "modules", kver, "vmlinuz")):
            raise ImageError(f"no kernel in {', '.join(map(os.path.basename, debs))}: neither "
                             f"boot/vmlinuz-{kver} nor lib/modules/{kver}/vmlinuz")
        os.makedirs(os.path.dirname(bzimage), exist_ok=True)
        os.symlink(f"../lib/modules/{kver}/vmlinuz", bzimage)
    with open(stamp, "w") as f:
        f.write("".join(os.path.basename(d) + "\n" for d in debs))
    return root


def _unzstd(data: bytes) -> bytes:
    """One zstd frame from the start of data (the stdlib has no zstd: the zstd tool)."""
    try:
        # Whatever follows the frame makes zstd complain after it wrote the frame out.
        return subprocess.run(["zstd", "-dcq"], input=data, capture_output=True).stdout
    except FileNotFoundError as e:
        raise ImageError("zstd is not installed: run ci/install-deps.sh") from e


def extract_vmlinux_bytes(bzimage: bytes) -> bytes:
    """The ELF kernel inside a bzImage (what scripts/extract-vmlinux does): XZ-compressed
    (Debian's 6.1) or zstd-compressed (Debian's 6.12)."""
    pos = bzimage.find(XZ_MAGIC)
    while pos >= 0:
        d = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
        try:
            data = d.decompress(bzimage[pos:])
        except lzma.LZMAError:
            data = b""
        if data.startswith(ELF_MAGIC):
            return data
        pos = bzimage.find(XZ_MAGIC, pos + 1)
    pos = bzimage.find(ZSTD_MAGIC)
    while pos >= 0:
        data = _unzstd(bzimage[pos:])
        if data.startswith(ELF_MAGIC):
            return data
        pos = bzimage.find(ZSTD_MAGIC, pos + 1)
    raise ImageError("no XZ- or zstd-compressed ELF found in the bzImage")


def vmlinux_path(kver: str, work: str) -> str:
    root = unpack_kernel(kver, work)
    out = os.path.join(kernel_dir(kver, work), "vmlinux")
    if not os.path.exists(out):
        with open(os.path.join(root, "boot", f"vmlinuz-{kver}"), "rb") as f:
            _atomic_write(out, extract_vmlinux_bytes(f.read()))
    return out


def run_depmod(kver: str, work: str) -> str:
    """depmod on the unpacked tree (the package ships no modules.dep); returns modules dir."""
    root = unpack_kernel(kver, work)
    mdir = os.path.join(root, "lib", "modules", kver)
    if not os.path.exists(os.path.join(mdir, "modules.dep")):
        _run(["depmod", "-b", root, kver])
    return mdir


def parse_modules_dep(mdir: str) -> dict[str, tuple[str, list[str]]]:
    """module name -> (path relative to mdir, [dependency paths])."""
    deps = {}
    with open(os.path.join(mdir, "modules.dep")) as f:
        for line in f:
            path, _, rest = line.partition(":")
            name = os.path.basename(path).split(".ko")[0].replace("-", "_")
            deps[name] = (path, rest.split())
    return deps


def builtin_modules(mdir: str) -> set[str]:
    """Modules built into the kernel (modules.builtin), e.g. virtio and virtio_pci on 6.12."""
    try:
        with open(os.path.join(mdir, "modules.builtin")) as f:
            return {os.path.basename(line.strip()).split(".ko")[0].replace("-", "_")
                    for line in f if line.strip()}
    except FileNotFoundError:
        return set()


def module_load_order(mdir: str, names: list[str]) -> list[str]:
    """Paths (relative to mdir) of `names` and their dependencies, dependencies first.
    A module built into the kernel needs no loading and is left out."""
    deps = parse_modules_dep(mdir)
    builtin = builtin_modules(mdir)
    by_path = {p: d for p, d in deps.values()}
    order: list[str] = []

    def visit(path: str, stack: tuple = ()):
        if path in order:
            return
        if path in stack:
            raise ImageError(f"module dependency cycle at {path}")
        for dep in by_path.get(path, []):
            visit(dep, stack + (path,))
        order.append(path)

    for n in names:
        if n not in deps and n in builtin:
            continue
        if n not in deps:
            raise ImageError(f"module {n} is not in {mdir}/modules.dep (is it built in?)")
        visit(deps[n][0])
    return order


def module_info(path: str, field: str) -> str:
    return _run(["modinfo", "-F", field, path]).stdout.strip()


# ----------------------------------------------------------------------------------------------
# The guest's /init: mounts, base virtio modules, then a command loop on ttyS1.
#
# Protocol on the second serial port (ttyS1, a channel of its own: kernel messages go to ttyS0):
#   host -> guest:  "RUN <id> <base64 of a shell script>\n"
#   guest -> host:  "@@B <id>\n" <base64 of stdout+stderr> "@@E <id> <exit status>\n"
# The loop runs in PID 1, which the OOM killer never picks; each command runs in a child shell.
# Base64 in both directions keeps the tty from interpreting anything and the markers unambiguous.

INIT_SCRIPT = r"""#!/bin/busybox sh
# SPDX-License-Identifier: GPL-2.0
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tmpfs -o size=100% tmpfs /tmp
for m in @BASE_MODULES@; do
    insmod /lib/modules/@KVER@/$m || echo "VBGUEST: insmod $m failed" > /dev/console
done
stty -F /dev/ttyS1 raw -echo
exec 3<>/dev/ttyS1
echo "VBGUEST: ready" > /dev/console
echo "@@READY" >&3
while true; do
    if ! read -r verb id payload <&3; then
        continue
    fi
    [ "$verb" = RUN ] || continue
    echo "$payload" | base64 -d > /tmp/.cmd
    sh /tmp/.cmd > /tmp/.out 2>&1 < /dev/null
    rc=$?
    { echo "@@B $id"; base64 /tmp/.out; echo "@@E $id $rc"; } >&3
done
"""


@dataclasses.dataclass
class GuestImage:
    kver: str
    vmlinux: str
    initramfs: str
    modules_dir: str           # unpacked /lib/modules/<kver> on the host
    base_modules: list[str]    # guest paths, in load order (loaded by /init)
    intree_modules: list[str]  # guest paths to insmod for the in-tree balloon (in order)
    vballoon_ko: str | None    # host path of the vballoon.ko inside this image, if any
    vballoon_modules: list[str]  # guest paths to insmod for vballoon (deps first)
    blk_modules: list[str] = dataclasses.field(default_factory=list)  # virtio_blk (deps first)


def _build_static(work: str, name: str, sources: list[str], cflags: list[str] = ()) -> str:
    """A static guest binary from `sources` (the .c files compiled, all hashed into its name),
    built once per content into <work>/bin."""
    h = hashlib.sha256()
    for src in sources:
        h.update(open(src, "rb").read())
    out = os.path.join(work, "bin", f"{name}-{h.hexdigest()[:16]}")
    if not os.path.exists(out):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        tmp = out + ".tmp"
        _run(["gcc", "-static", "-O2", "-Wall", "-Wextra", "-Werror", *cflags, "-o", tmp]
             + [src for src in sources if src.endswith(".c")])
        os.replace(tmp, out)
    return out


def build_hog(work: str) -> str:
    return _build_static(work, "hog", [os.path.join(HERE, "hog.c")])


# The workload generator lives with the simulator's migration model; the guest binary is
# built from the same source, so the real guest and the model run one program logic.
GENERATOR_DIR = os.path.join(REPO_ROOT, "device-sim", "migration")
VBWORK_SOURCES = [os.path.join(HERE, "vbwork.c"),
                  os.path.join(GENERATOR_DIR, "workload_generator.c"),
                  os.path.join(GENERATOR_DIR, "workload_generator.h")]


def build_vbwork(work: str) -> str:
    return _build_static(work, "vbwork", VBWORK_SOURCES, ["-I", GENERATOR_DIR])


def build_vbpress(work: str) -> str:
    """The over-inflation workload (vbpress.c: a hot file set and an anonymous set)."""
    return _build_static(work, "vbpress", [os.path.join(HERE, "vbpress.c")])


def _is_static_elf(path: str) -> bool:
    """True for an x86-64 ELF without a PT_INTERP program header (no dynamic loader)."""
    with open(path, "rb") as f:
        hdr = f.read(64)
        if hdr[:4] != ELF_MAGIC or hdr[4] != 2:
            return False
        phoff, = struct.unpack_from("<Q", hdr, 32)
        phentsize, phnum = struct.unpack_from("<HH", hdr, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != 3 for i in range(phnum))


class _Newc:
    """A minimal writer of the cpio "newc" format the kernel unpacks (deterministic output)."""

    def __init__(self):
        self.buf = io.BytesIO()
        self.ino = 1

    def _entry(self, name: str, mode: int, data: bytes = b"", rdev: tuple = (0, 0)):
        nameb = name.encode() + b"\0"
        hdr = "070701" + "".join(f"{v:08x}" for v in (
            self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(nameb), 0))
        self.ino += 1
        self.buf.write(hdr.encode() + nameb)
        self.buf.write(b"\0" * (-(110 + len(nameb)) % 4))
        self.buf.write(data)
        self.buf.write(b"\0" * (-len(data) % 4))

    def dir(self, name):
        self._entry(name, 0o040755)

    def file(self, name, data: bytes, perm=0o644):
        self._entry(name, 0o100000 | perm, data)

    def symlink(self, name, target):
        self._entry(name, 0o120777, target.encode())

    def chardev(self, name, major, minor):
        self._entry(name, 0o020600, rdev=(major, minor))

    def finish(self) -> bytes:
        self._entry("TRAILER!!!", 0)
        self.buf.write(b"\0" * (-self.buf.tell() % 512))
        return self.buf.getvalue()


def _tree_entries(root: str) -> list[tuple[str, str]]:
    """(archive path, kind) of everything below root, parents first, in a stable order."""
    found = []
    for here, dirs, files in os.walk(root):
        dirs.sort()
        rel = os.path.relpath(here, root)
        if rel != ".":
            found.append((rel, "dir"))
        for name in sorted(files):
            path = os.path.join(here, name)
            found.append((os.path.relpath(path, root),
                          "symlink" if os.path.islink(path) else "file"))
    return found


def build_initramfs(kver: str, mdir: str, work: str, vballoon_ko: str | None,
                    extra_root: str | None = None) -> GuestImage:
    busybox = shutil.which("busybox") or "/bin/busybox"
    if not os.path.exists(busybox):
        raise ImageError("busybox not found: run ci/install-deps.sh (busybox-static)")
    if not _is_static_elf(busybox):
        raise ImageError(f"{busybox} is dynamically linked: install busybox-static")
    hog = build_hog(work)
    vbwork = build_vbwork(work)
    vbpress = build_vbpress(work)

    base = module_load_order(mdir, VIRTIO_BASE_MODULES)
    intree = [p for p in module_load_order(mdir, [INTREE_BALLOON_MODULE]) if p not in base]
    blk = [p for p in module_load_order(mdir, BLK_MODULES) if p not in base]
    vb_deps: list[str] = []
    if vballoon_ko:
        if not os.path.isfile(vballoon_ko):
            raise ImageError(f"{vballoon_ko} does not exist")
        magic = module_info(vballoon_ko, "vermagic").split()
        if not magic or magic[0] != kver:
            raise ImageError(f"{vballoon_ko} was built for kernel {magic[0] if magic else '?'}, "
                             f"the guest runs {kver}: rebuild it with {build_hint(kver)}")
        names = [d for d in module_info(vballoon_ko, "depends").split(",") if d]
        vb_deps = [p for p in module_load_order(mdir, names) if p not in base] if names else []

    init = INIT_SCRIPT.replace("@KVER@", kver).replace("@BASE_MODULES@", " ".join(base))
    inputs = [("init", hashlib.sha256(init.encode()).hexdigest()),
              ("busybox", sha256_file(busybox)), ("hog", sha256_file(hog)),
              ("vbwork", sha256_file(vbwork)), ("vbpress", sha256_file(vbpress))]
    for p in base + intree + vb_deps + blk:
        inputs.append((p, sha256_file(os.path.join(mdir, p))))
    if vballoon_ko:
        inputs.append((GUEST_VBALLOON_KO, sha256_file(vballoon_ko)))
    extra = _tree_entries(extra_root) if extra_root else []
    for rel, kind in extra:
        path = os.path.join(extra_root, rel)
        inputs.append((rel, kind, sha256_file(path) if kind == "file" else
                       os.readlink(path) if kind == "symlink" else ""))
    key = hashlib.sha256(repr((kver, inputs)).encode()).hexdigest()[:16]
    out = os.path.join(work, "initramfs", f"initramfs-{kver}-{key}.cpio.gz")

    def g(p):  # guest path of a module
        return f"/lib/modules/{kver}/{p}"

    img = GuestImage(kver=kver, vmlinux="", initramfs=out, modules_dir=mdir,
                     base_modules=[g(p) for p in base],
                     intree_modules=[g(p) for p in intree],
                     vballoon_ko=vballoon_ko,
                     vballoon_modules=[g(p) for p in vb_deps] + ([GUEST_VBALLOON_KO]
                                                                 if vballoon_ko else []),
                     blk_modules=[g(p) for p in blk])
    if os.path.exists(out):
        return img

    a = _Newc()
    for d in ["bin", "dev", "proc", "sys", "tmp", "root", "lib", "lib/modules",
              f"lib/modules/{kver}"]:
        a.dir(d)
    a.chardev("dev/console", 5, 1)
    a.file("bin/busybox", open(busybox, "rb").read(), 0o755)
    a.symlink("bin/sh", "busybox")
    a.file("bin/hog", open(hog, "rb").read(), 0o755)
    a.file("bin/vbwork", open(vbwork, "rb").read(), 0o755)
    a.file("bin/vbpress", open(vbpress, "rb").read(), 0o755)
    a.file("init", init.encode(), 0o755)
    made = set()
    for p in base + intree + vb_deps + blk:
        parts = p.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = f"lib/modules/{kver}/" + "/".join(parts[:i])
            if d not in made:
                made.add(d)
                a.dir(d)
        a.file(f"lib/modules/{kver}/{p}", open(os.path.join(mdir, p), "rb").read())
    if vballoon_ko:
        a.file(GUEST_VBALLOON_KO.lstrip("/"), open(vballoon_ko, "rb").read())
    # A root laid out on the host (an installed module, /etc/modprobe.d), over the above.
    made |= {f"lib/modules/{kver}", "lib/modules", "lib"}
    for rel, kind in extra:
        path = os.path.join(extra_root, rel)
        if kind == "dir":
            if rel not in made and rel not in ("bin", "dev", "proc", "sys", "tmp", "root"):
                made.add(rel)
                a.dir(rel)
        elif kind == "symlink":
            a.symlink(rel, os.readlink(path))
        else:
            a.file(rel, open(path, "rb").read(), os.stat(path).st_mode & 0o777)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    _atomic_write(out, gzip.compress(a.finish(), compresslevel=6, mtime=0))
    return img


def prepare(vballoon_ko: str | None = None, work: str | None = None,
            extra_root: str | None = None) -> GuestImage:
    """Everything a guest needs; cheap when cached. Raises ImageError with a remedy.
    extra_root: a directory whose tree is laid over the guest's root (e.g. what
    `make modules_install INSTALL_MOD_PATH=<dir>` wrote, and etc/modprobe.d)."""
    work = work or work_dir()
    os.makedirs(work, exist_ok=True)
    kver = headers_kernel_version()
    vmlinux = vmlinux_path(kver, work)
    mdir = run_depmod(kver, work)
    img = build_initramfs(kver, mdir, work, vballoon_ko, extra_root)
    img.vmlinux = vmlinux
    return img


def default_vballoon_ko() -> str:
    return os.environ.get("VBALLOON_KO", os.path.join(REPO_ROOT, "vballoon.ko"))


def missing_vballoon_message(path: str) -> str:
    try:
        how = build_hint(headers_kernel_version())
    except ImageError:
        how = f"`{REPO_ROOT}/driver/linux/build-module.sh`"
    return f"vballoon.ko not found at {path}: build it with {how} (or point VBALLOON_KO at one)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vballoon-ko", help="also put this vballoon.ko into the initramfs")
    ap.add_argument("--work", help=f"cache folder (default $VBALLOON_GUEST_WORK or {DEFAULT_WORK})")
    args = ap.parse_args(argv)
    try:
        img = prepare(args.vballoon_ko, args.work)
    except ImageError as e:
        print(f"guest_image: {e}", file=sys.stderr)
        return 1
    for k, v in dataclasses.asdict(img).items():
        print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
