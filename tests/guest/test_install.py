# SPDX-License-Identifier: GPL-2.0
"""The README's install lines, in a guest: vballoon installed as a user installs it.

On the host, what cannot run in the guest (there is no compiler there): the README's
`make -C <headers> M=<repo> modules_install` with INSTALL_MOD_PATH pointing at a staging root,
and the blacklist file copied to its etc/modprobe.d/. That root is laid over the guest's
initramfs, whose /lib/modules/<version> already holds the in-tree virtio modules and
virtio_balloon. In the guest, the rest of the README: `depmod -a`, then `modprobe vballoon`,
which must bind the balloon device although virtio_balloon carries the same alias; then a
lookup by the device's alias (what udev does at boot) must load vballoon and not
virtio_balloon; and the balloon must inflate and deflate.

Needs vballoon.ko built (the README's first line) in <repo>, or in the folder of
$VBALLOON_KO when that is a build of its own (driver/linux/build-module.sh --out DIR, for a
second kernel); fails, never skips, without it. Kernels that compress their modules (6.12:
CONFIG_MODULE_COMPRESS_ALL, xz) install vballoon.ko.xz, and busybox's modprobe loads that.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

import pytest

import guest_image
from guestvm import BALLOON_TIMEOUT_S, Driver, GuestError, GuestVM

REPO = guest_image.REPO_ROOT
BLACKLIST = os.path.join(REPO, "packaging", "vballoon-blacklist.conf")
KIB = 1024


# What modules_install leaves: the module, compressed when the kernel says so.
INSTALLED_KO = re.compile(r"/vballoon\.ko(\.xz|\.gz|\.zst)?$")


def _module_tree() -> str:
    """The folder the module was built in: M= of the README's make lines."""
    ko = guest_image.default_vballoon_ko()
    tree = os.path.dirname(os.path.abspath(ko))
    if not os.path.isfile(os.path.join(tree, "Kbuild")):
        pytest.fail(f"{ko} is not in a module build folder (no Kbuild beside it): build it "
                    "with driver/linux/build-module.sh [--out DIR]", pytrace=False)
    if not os.path.isfile(ko):
        pytest.fail(guest_image.missing_vballoon_message(ko), pytrace=False)
    return tree


def _install_root(kver: str, root: str) -> None:
    """The README's host-side install lines, into `root` instead of /."""
    tree = _module_tree()
    make = subprocess.run(["make", "-C", guest_image.headers_dir(kver), f"M={tree}",
                           "modules_install", f"INSTALL_MOD_PATH={root}"],
                          capture_output=True, text=True)
    if make.returncode != 0:
        pytest.fail(f"make modules_install failed ({make.returncode}):\n"
                    f"{make.stdout}{make.stderr}", pytrace=False)
    etc = os.path.join(root, "etc", "modprobe.d")
    os.makedirs(etc)
    shutil.copy(BLACKLIST, etc)


@pytest.fixture(scope="module")
def installed_vm():
    kver = guest_image.headers_kernel_version()
    with tempfile.TemporaryDirectory(prefix="vballoon-install-") as root:
        _install_root(kver, root)
        installed = [os.path.relpath(os.path.join(d, f), root)
                     for d, _, files in os.walk(root) for f in files]
        assert any(INSTALLED_KO.search(p) for p in installed), installed
        try:
            img = guest_image.prepare(extra_root=root)
        except guest_image.ImageError as e:
            pytest.fail(f"preparing the guest image failed: {e}", pytrace=False)
    vm = GuestVM(img, name="vballoon-installed", ram_mib=2048)
    try:
        vm.start()
    except GuestError as e:
        pytest.fail(f"the guest did not boot: {e}", pytrace=False)
    try:
        yield vm
    finally:
        vm.stop()


def _bound(vm: GuestVM, dev: str) -> str | None:
    out = vm.run(f"readlink /sys/bus/virtio/devices/{dev}/driver", check=False)
    return os.path.basename(out.output.strip()) if out.status == 0 else None


def _wait_bound(vm: GuestVM, dev: str, want: str) -> None:
    vm.wait_bound(Driver(want, want, want, []), BALLOON_TIMEOUT_S)
    assert _bound(vm, dev) == want
    vm.sh(f"test -e /sys/bus/virtio/drivers/{want}/{dev}")


def test_modprobe_binds_the_installed_module_and_the_balloon_works(installed_vm):
    vm, q = installed_vm, installed_vm.qmp
    dev = vm.balloon_device()
    kver = vm.sh("uname -r").strip()
    assert _bound(vm, dev) is None, "nothing may be bound before modprobe"
    q.balloon(vm.ram_bytes)

    vm.sh("depmod -a")
    # The installed module, the blacklist, and both drivers under the same alias.
    deps = vm.sh(f"cat /lib/modules/{kver}/modules.dep")
    assert re.search(r"/vballoon\.ko(\.\w+)?:", deps), deps
    assert re.search(r"/virtio_balloon\.ko(\.\w+)?:", deps), deps
    aliases = vm.sh(f"grep 'virtio:d00000005v' /lib/modules/{kver}/modules.alias")
    assert {line.split()[-1] for line in aliases.splitlines()} == {"vballoon", "virtio_balloon"}

    vm.sh("modprobe vballoon")
    _wait_bound(vm, dev, "vballoon")
    assert "virtio_balloon" not in vm.loaded_modules()

    # Inflate to half, then deflate: MemTotal follows the balloon exactly.
    total0 = vm.meminfo()["MemTotal"]
    q.balloon(vm.ram_bytes // 2)
    q.wait_balloon(vm.ram_bytes // 2, BALLOON_TIMEOUT_S)
    assert total0 - vm.meminfo()["MemTotal"] == (vm.ram_bytes // 2) // KIB
    q.balloon(vm.ram_bytes)
    q.wait_balloon(vm.ram_bytes, BALLOON_TIMEOUT_S)
    assert vm.meminfo()["MemTotal"] == total0

    # At boot udev loads modules by the device's alias: with the blacklist installed that
    # is vballoon alone, although virtio_balloon matches the alias too.
    # (busybox modprobe -r would also try to unload virtio and virtio_ring, which are busy)
    vm.sh("rmmod vballoon", timeout=120)
    assert _bound(vm, dev) is None
    modalias = vm.sh(f"cat /sys/bus/virtio/devices/{dev}/modalias").strip()
    vm.sh(f"modprobe {modalias}")
    _wait_bound(vm, dev, "vballoon")
    assert "virtio_balloon" not in vm.loaded_modules()
