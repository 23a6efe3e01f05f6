#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# Writes the seed corpora (corpus/<target>/) and the hand-written regression inputs
# (regressions/<target>/<bug id>--<what>) of the fuzz targets. Each input is spelled out in
# the order the harness reads it (fuzz_input.h: little-endian, front to back), so a seed
# starts the fuzzer on a meaningful path: a driver that inflates, deflates and reports
# stats, a core that balloons a few hundred pages on each guest page size, and so on.
#
#   tests/fuzz/make_corpus.py            rewrite them all
#   VB_FUZZ_TRACE=1 build-fuzz/tests/fuzz/<target> <file>   shows how one is read
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


class Bytes:
    def __init__(self):
        self.data = bytearray()

    def u8(self, v):
        self.data += struct.pack("<B", v & 0xFF)
        return self

    def u16(self, v):
        self.data += struct.pack("<H", v & 0xFFFF)
        return self

    def u32(self, v):
        self.data += struct.pack("<I", v & 0xFFFFFFFF)
        return self

    def u64(self, v):
        self.data += struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)
        return self

    def raw(self, b):
        self.data += b
        return self


def bit(n):
    return 1 << n


# Feature bits (spec/include/vballoon/spec/virtio_balloon.h).
MUST_TELL_HOST, STATS_VQ, DEFLATE_ON_OOM, FREE_PAGE_HINT, PAGE_POISON, PAGE_REPORTING = range(6)
X_CHUNKED, X_INIT_ON_INFLATE = 20, 21
INDIRECT_DESC, EVENT_IDX, VERSION_1 = 28, 29, 32
DESC_NEXT, DESC_WRITE, DESC_INDIRECT = 1, 2, 4

# ---- fuzz_device_queue ---------------------------------------------------------------------


def near_small(b, value):
    """FuzzInput::near(limit), first case: u32 % limit (value < limit)."""
    return b.u8(0).u32(value)


def ring_seed(size_log, event_idx, indirect, base, ops):
    b = Bytes().u8(0)  # even: the DeviceQueue harness
    b.u8(size_log).u8(event_idx).u8(indirect).u8(0).u16(base)
    b.raw(ops)
    return bytes(b.data)


def ring_desc(index, addr, length, flags, nxt):
    b = Bytes().u8(0).u16(index)
    near_small(b, addr)
    b.u8(3).u32(length)  # fuzz_len: any u32
    b.u8(flags)  # fuzz_flags without undefined bits
    b.u8(0).u16(nxt)  # next: below(size + 1)
    return bytes(b.data)


def ring_table_entry(gpa, addr, length, flags, nxt):
    b = Bytes().u8(2)
    near_small(b, gpa)
    near_small(b, addr)
    b.u8(3).u32(length).u8(flags).u16(nxt)
    return bytes(b.data)


def ring_offer(head, raw=False):
    """Offers `head` (below(size + 1) of it, or the raw value)."""
    return bytes(Bytes().u8(3).u8(0x80 if raw else 0).u16(head).data)


def ring_pop(count):
    return bytes(Bytes().u8(5).u8(count - 1).data)


def ring_push(start, written):
    return bytes(Bytes().u8(6).u16(start).u32(written).data)


def ring_seeds():
    seeds = {}
    # Two chained buffers, readable then writable; popped, returned, and again.
    ops = (ring_desc(0, 0x8000, 64, DESC_NEXT, 1) + ring_desc(1, 0x9000, 32, DESC_WRITE, 0) +
           ring_offer(0) + ring_pop(2) + ring_push(0, 32) + ring_offer(0) + ring_pop(1))
    seeds["ring-chain"] = ring_seed(3, 0, 0, 0, ops)
    # An indirect table of three entries.
    ops = (ring_table_entry(0x6000, 0x8000, 16, DESC_NEXT, 1) +
           ring_table_entry(0x6010, 0x8100, 16, DESC_NEXT, 2) +
           ring_table_entry(0x6020, 0x9000, 8, DESC_WRITE, 0) +
           ring_desc(2, 0x6000, 48, DESC_INDIRECT, 0) + ring_offer(2) + ring_pop(1) +
           ring_push(0, 8))
    seeds["ring-indirect"] = ring_seed(4, 1, 1, 0x1000, ops)
    # A loop, a head out of range, and an avail index far ahead.
    ops = (ring_desc(0, 0x8000, 4, DESC_NEXT, 1) + ring_desc(1, 0x8000, 4, DESC_NEXT, 0) +
           ring_offer(0) + ring_offer(7, raw=True) + ring_pop(3) +
           bytes(Bytes().u8(4).u8(1).u16(0x4000).data) + ring_pop(2))
    seeds["ring-hostile"] = ring_seed(2, 0, 0, 0, ops)
    return seeds


# Device harness: profile choices in run_device().
PROFILE_QEMU, PROFILE_FIRECRACKER, PROFILE_CLOUD_HYPERVISOR, PROFILE_FULL = range(4)
RAM_256K, RAM_1M, RAM_2M_PLUS, RAM_4M = range(4)
HOST_4K, HOST_8K, HOST_64K, HOST_2M = range(4)
DRIVER_AREA_PAGES = 32  # kDriverAreaBytes / 4096


def device_header(ram, profile, extra, host_page, wanted, queue_logs, poison=None,
                  discard_per_page=0, target=0):
    b = Bytes().u8(1)  # odd: the BalloonDevice harness
    b.u8(ram).u8(profile).u64(extra)
    b.u8(discard_per_page).u8(0).u32(target).u8(host_page)
    # initialise(): features, a sane layout, VERSION_1, one size per transport queue.
    b.u64(wanted).u8(0).u8(0)
    for log in queue_logs:
        b.u8(log)
    if poison is None:
        b.u8(0)
    else:
        b.u8(1).u8(poison).u8(1)
    return b


def pfn_choice(b, pfn):
    """DeviceHarness::pfn(): the default case, a page above the driver area."""
    return b.u8(3).u16(pfn - DRIVER_AREA_PAGES)


def dev_request(b, queue, head, pfns, bitmap_len=None, pieces=1, claimed_bytes=None):
    assert 1 <= len(pfns) <= 80
    b.u8(3).u8(queue).u16(head).u8(pieces - 1).u8(len(pfns) - 1)
    for pfn in pfns:
        pfn_choice(b, pfn)
    b.u8(0).u16(0x100 * queue + head * 0x20)  # buffer_gpa(): the buffer area
    if claimed_bytes is None:
        b.u8(0)  # not 0x77: the PFN array's real length
    else:
        b.u8(0x77).u8(3).u32(claimed_bytes)
    if bitmap_len is None:
        b.u8(0)
    else:
        b.u8(1).u8(0).u16(0x800 + head * 8).u8(bitmap_len)
    return b.u8(0)  # kick


def dev_chunks(b, queue, head, chunks, bitmap_len=None):
    b.u8(5).u8(queue).u16(head).u8(len(chunks) - 1).u8(0 if bitmap_len is None else 1)
    for first, pages in chunks:
        pfn_choice(b, first)
        b.u8(pages - 1).u8(0)
    if bitmap_len is not None:
        b.u8(0).u16(0x900 + head * 8).u8(bitmap_len)
    return b


def dev_stats(b, queue, head, entries):
    b.u8(7).u8(queue).u16(head).u8(len(entries)).u8(0).u16(0xa00)
    for tag, value in entries:
        b.u8(tag).u64(value)
    return b.u8(0).u8(0)


def device_seeds():
    seeds = {}
    # Full profile: inflate, deflate, stats, a host request for stats, a reset.
    b = device_header(RAM_1M, PROFILE_FULL, 0, HOST_4K,
                      bit(VERSION_1) | bit(MUST_TELL_HOST) | bit(STATS_VQ) | bit(EVENT_IDX),
                      [8, 8, 8, 0, 0])
    dev_stats(b, 2, 0, [(4, 1 << 20), (5, 1 << 30)])
    dev_request(b, 0, 0, [40, 41, 42, 43, 100])
    dev_request(b, 1, 0, [41, 100], pieces=2)
    b.u8(11)  # request_stats
    b.u8(12).u8(1)  # hold deflate acks
    dev_request(b, 1, 1, [40])
    b.u8(12).u8(0)  # release them
    b.u8(15)  # reset and a new driver
    b.u64(bit(VERSION_1) | bit(STATS_VQ)).u8(0).u8(0).raw(bytes([8, 8, 8, 0, 0])).u8(0)
    dev_request(b, 0, 0, [60, 61])
    seeds["device-full"] = bytes(b.data)
    # Chunked requests with init-on-inflate bitmaps on 2 MiB host pages, poison 0.
    b = device_header(RAM_4M, PROFILE_FULL, bit(X_CHUNKED) | bit(X_INIT_ON_INFLATE), HOST_2M,
                      bit(VERSION_1) | bit(X_CHUNKED) | bit(X_INIT_ON_INFLATE) |
                      bit(PAGE_POISON) | bit(INDIRECT_DESC), [8, 8, 8, 0, 0], poison=0)
    dev_chunks(b, 0, 0, [(512, 40), (552, 40)], bitmap_len=1)
    dev_chunks(b, 1, 0, [(520, 8)])
    seeds["device-chunked"] = bytes(b.data)
    # Firecracker (1 KiB PFN arrays), a request over its bound and an avail idx jump.
    b = device_header(RAM_256K, PROFILE_FIRECRACKER, bit(STATS_VQ) | bit(DEFLATE_ON_OOM),
                      HOST_4K, ~0, [7, 7, 7])
    dev_request(b, 0, 0, [33, 34, 35] * 20)
    dev_request(b, 0, 1, [36, 37], claimed_bytes=2048)
    b.u8(2).u8(0).u8(1).u16(0x1234)  # avail idx far ahead: NEEDS_RESET
    b.u8(8).u8(0)  # kick it
    seeds["device-firecracker"] = bytes(b.data)
    # QEMU with PFN requests and a poison value the device can write.
    b = device_header(RAM_2M_PLUS, PROFILE_QEMU, bit(DEFLATE_ON_OOM) | bit(X_INIT_ON_INFLATE),
                      HOST_64K, bit(VERSION_1) | bit(PAGE_POISON) | bit(X_INIT_ON_INFLATE),
                      [7, 7, 7], poison=0xAA)
    dev_request(b, 0, 0, list(range(64, 80)), bitmap_len=2)
    dev_request(b, 1, 0, list(range(64, 72)))
    seeds["device-qemu-poison"] = bytes(b.data)
    return seeds


def device_regressions():
    regressions = {}
    # Bug "used-alias": a one-entry queue whose used ring starts on the avail ring's idx
    # field, no EVENT_IDX. The activation pass drains the queue: disable_notifications()
    # stores 1 into avail idx, the chain is returned, enable_notifications() stores 0 and
    # then sees idx != last_avail_idx: BalloonDevice::drain_queue() loops forever, holding
    # the transport's state lock (the guest's next status write blocks too).
    b = Bytes().u8(1).u8(RAM_1M).u8(PROFILE_CLOUD_HYPERVISOR).u64(0)
    b.u8(0).u8(0).u32(0).u8(HOST_4K)
    b.u64(bit(VERSION_1)).u8(0xF0).u8(0)  # hostile layout, VERSION_1
    b.u8(0)  # queue 0: one entry
    for gpa in (0x10000, 0x26262, 0x26264):  # desc, avail, used = avail + 2
        near_small(b, gpa)
    b.u8(8).u8(0)  # queue 1: 256 entries, more than the device's 128: refused
    for gpa in (0x6260, 0, 0):
        near_small(b, gpa)
    b.u8(0)  # no poison_val
    regressions["used-alias--drain-spins-forever"] = bytes(b.data)
    return regressions


# ---- fuzz_core_lying_device ----------------------------------------------------------------

SHIFT_4K, SHIFT_8K, SHIFT_16K, SHIFT_64K = range(4)
NEED_PATTERN, INIT_BEFORE_INFLATE, POISON_PATTERN = 1, 2, 4


def core_header(shift, pages, first_mode, first_arg, traits, max_order, offered, rings,
                indirect=0, stats_mask=0xFF):
    b = Bytes().u8(shift).u16(pages - 16).u8(first_mode)
    if first_mode == 1:
        b.u16(first_arg)
    elif first_mode == 2:
        b.u8(first_arg)
    elif first_mode == 3:
        b.u32(first_arg)
    b.u8(traits).u8(max_order).u64(offered)
    for log in rings:
        b.u8(log)
    return b.u8(indirect).u16(stats_mask)


OP_TARGET, OP_ADJUST, OP_ADJUST_N, OP_OOM, OP_STATS, OP_MIGRATE = 0, 2, 3, 4, 5, 6
OP_ALLOC_FAIL, OP_MOOD, OP_PRESSURE, OP_MAX_ORDER, OP_RELEASE = 7, 8, 9, 10, 11


def target(value):
    return bytes(Bytes().u8(OP_TARGET).u8(5).u32(value).data)


def adjust_n(n):
    return bytes(Bytes().u8(OP_ADJUST_N).u8(n - 1).data)


def migrate(index):
    return bytes(Bytes().u8(OP_MIGRATE).u16(index).data)


def core_input(header, ops, tape=b""):
    return bytes(header.data) + struct.pack("<H", len(ops)) + ops + tape


def ack(pick=0, bitmap=None, length_mode=4):
    """What the device does at one wait: acknowledge buffer `pick` in flight."""
    b = Bytes().u8(0).u8(pick)
    if bitmap is not None:
        b.u8(bitmap)
    return bytes(b.u8(length_mode).data)


def core_seeds():
    seeds = {}
    everything = (bit(MUST_TELL_HOST) | bit(STATS_VQ) | bit(DEFLATE_ON_OOM) | bit(PAGE_POISON))
    ops = (target(600) + adjust_n(4) + bytes([OP_STATS]) + migrate(10) + migrate(500) +
           bytes([OP_OOM]) + target(100) + adjust_n(4) + bytes([OP_PRESSURE, 0, 3, 4]) +
           target(2000) + adjust_n(8) + bytes([OP_RELEASE]))
    seeds["core-4k-honest"] = core_input(
        core_header(SHIFT_4K, 1024, 0, 0, 0, 10, everything, [7, 7, 7, 0, 0]), ops)
    # 64 KiB pages, chunked, the device vouching for some chunks, out of order.
    ops = target(4096) + adjust_n(2) + target(512) + adjust_n(2)
    stats_seed = struct.pack("<I", 12345)  # prepare() asks the OS for its numbers
    tape = stats_seed + ack(1, 0xFF, 5) + ack(0, length_mode=1)
    seeds["core-64k-chunked-bitmaps"] = core_input(
        core_header(SHIFT_64K, 512, 1, 4096, NEED_PATTERN, 9,
                    bit(X_CHUNKED) | bit(X_INIT_ON_INFLATE) | bit(STATS_VQ), [6, 6, 6, 0, 0]),
        ops, tape)
    # 16 KiB pages across the 16 TiB line, allocation failures and a device that goes away.
    ops = (target(0xFFFFFFFF) + bytes([OP_ALLOC_FAIL, 1]) + struct.pack("<Q", 0xF0F0) +
           adjust_n(3) + bytes([OP_MOOD, 1]) + adjust_n(2))
    tape = (ack(0, 0xFF) + bytes([0xE9]) + struct.pack("<I", 7) + bytes([0]) + ack(0, 0x0F) +
            bytes([0xFF]))
    seeds["core-16k-wire-limit"] = core_input(
        core_header(SHIFT_16K, 300, 2, 20, NEED_PATTERN | INIT_BEFORE_INFLATE, 4,
                    bit(MUST_TELL_HOST) | bit(X_INIT_ON_INFLATE), [2, 2, 0, 0, 0]),
        ops, tape)
    return seeds


def core_regressions():
    regressions = {}
    # Bug "chunk-ring": chunked, 256-entry inflateq, 1-entry deflateq. Chunks per message
    # come from the inflate ring (32), so no deflate message ever fits the deflateq;
    # tell_host() fails and deflate() frees pages the host still holds.
    ops = target(480) + adjust_n(1) + target(0) + adjust_n(1)
    regressions["chunk-ring--deflate-frees-pages-the-host-holds"] = core_input(
        core_header(SHIFT_64K, 271, 0, 0, NEED_PATTERN, 8, bit(X_CHUNKED), [8, 0, 0, 0, 0]),
        ops)
    # Bug "migrate-wire": 4 KiB pages straddling the 16 TiB line. Compaction moves a
    # ballooned page to one above it; migrate_page() packs the new page's PFN into 32 bits
    # and tells the host to take guest page (new_pfn mod 2^32).
    header = core_header(SHIFT_4K, 176, 3, 0xFFFFFFA8, 0, 0, 0, [9, 0, 0, 0, 0])
    ops = target(8) + adjust_n(1) + bytes([OP_PRESSURE, 1, 0, 39]) + migrate(0)
    regressions["migrate-wire--new-page-pfn-truncated"] = core_input(header, ops)
    # Bug "ring-1": init-on-inflate on a one-entry inflateq: a message and its bitmap are
    # two descriptors, never accepted; inflate() keeps the pages in the balloon (and in
    # `actual`) although the host never heard of them.
    ops = target(64) + adjust_n(1)
    regressions["ring-1--inflate-never-told"] = core_input(
        core_header(SHIFT_4K, 64, 0, 0, NEED_PATTERN, 0, bit(X_INIT_ON_INFLATE),
                    [0, 0, 0, 0, 0]), ops)
    return regressions


def write(folder, inputs):
    os.makedirs(folder, exist_ok=True)
    for name, data in sorted(inputs.items()):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


def main():
    write(os.path.join(HERE, "corpus", "fuzz_device_queue"), {**ring_seeds(), **device_seeds()})
    write(os.path.join(HERE, "corpus", "fuzz_core_lying_device"), core_seeds())
    write(os.path.join(HERE, "regressions", "fuzz_device_queue"), device_regressions())
    write(os.path.join(HERE, "regressions", "fuzz_core_lying_device"), core_regressions())
    return 0


if __name__ == "__main__":
    sys.exit(main())
