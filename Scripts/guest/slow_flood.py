"""The slow floods of flood-benchmark.py (--only slow-write,slow-notify): a peer that keeps
nothing, whose delegate or callback sleeps D ms (--delay-ms, default 100) per batch or value, under
a flood through the real bluetoothd; BlueZKit (Benchmarks/FloodPeer's flood-peer) beside Python
(bless, bleak), R runs each, alternating, --slow-duration seconds each (default 60).

slow-write: the peer on hci1 is `flood-peer peripheral --delegate-delay-ms D` or
Benchmarks/python/bless_slow_peripheral.py (RX only, write and write without response). The
central on hci0 (this driver, through bluetoothd's D-Bus API) takes RX's AcquireWrite socket and
writes MTU - 3 byte chunks (at most 510) as fast as the socket takes them. BlueZKit's bound: at
most 1024 writes without response wait for the delegate queue, later ones are dropped and logged
(WriteWithoutResponseBacklog).

slow-notify: `flood-peer notifier` on hci1 (the same for both sides) calls updateValue with
values of the central's maximumUpdateValueLength (at most 510 bytes) as fast as
peripheralManagerIsReady allows; the central on hci0 is `flood-peer central --delegate-delay-ms
D` or Benchmarks/python/bleak_slow_central.py (both StartNotify, their default). BlueZKit's
bound: at most 128 values per characteristic wait for the delegate queue, the oldest is dropped
(CentralDeliveryBacklog).

The side under test's resident memory is read after --warmup seconds and at the end:
write_flood_memory_growth_kib and notification_flood_memory_growth_kib = end - warm-up of
smaps_rollup's Rss (it walks the page tables; /proc/PID/status's VmRSS, beside it, lags by
megabytes on the guest's Linux 6.1, which adds up per-thread counts late), per side,
with the ratios BlueZKit / Python; also its status and smaps_rollup fields at the end (what
grows), a VmRSS sample every 5 s, bluetoothd's and dbus-daemon's VmRSS (a backlog the peer does
not hold may wait there), the rates sent and delivered to the delegate or callback, and the drops
BlueZKit logged (counted from its warnings once its backlog drained, after the flood).
"""

import json
import os
import re
import time

from guest_common import die, log

NAME = "Flood"
RX = "6e400002-b5a3-f393-e0a9-e50e24dcca9e"
# Linux before 6.2 counts VmRSS, RssAnon and RssFile per thread and adds them up every 64 page
# events: /proc/PID/status may lag by hundreds of pages; smaps_rollup walks the page tables.
STATUS_FIELDS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "VmData")
ROLLUP_FIELDS = ("Rss", "Anonymous", "Private_Dirty", "Shared_Clean")
DROPS = {
    "writes": re.compile(r"(\d+) writes without response were dropped"),
    "notifications": re.compile(r"(\d+) notifications or discoveries were dropped"),
}


def memory(pid):
    """The status and smaps_rollup fields of `pid`, KiB; {} once it is gone."""
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                key, _, value = line.partition(":")
                if key in STATUS_FIELDS:
                    fields[key] = int(value.split()[0])
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                key, _, value = line.partition(":")
                if key in ROLLUP_FIELDS:
                    fields["smaps_" + key] = int(value.split()[0])
    except (OSError, ValueError):
        pass
    return fields


def daemons():
    """VmRSS (KiB) of bluetoothd and dbus-daemon, summed over their processes."""
    found = {"bluetoothd": 0, "dbus-daemon": 0}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as comm:
                name = comm.read().strip()
        except OSError:
            continue
        if name in found:
            found[name] += memory(pid).get("VmRSS", 0)
    return found


def bus_queue(bench, pid):
    """What dbus-daemon holds for `pid`'s connection (Debug.Stats: bytes and messages queued
    to it and from it), or None."""
    try:
        daemon = bench.dbus.Interface(bench.bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus"),
                                      "org.freedesktop.DBus")
        stats = bench.dbus.Interface(bench.bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus"),
                                     "org.freedesktop.DBus.Debug.Stats")
        for name in daemon.ListNames():
            if name.startswith(":") and int(daemon.GetConnectionUnixProcessID(name)) == pid:
                found = stats.GetConnectionStats(name)
                return {key: int(found[key]) for key in
                        ("IncomingBytes", "IncomingMessages", "OutgoingBytes", "OutgoingMessages") if key in found}
    except bench.dbus.DBusException as error:
        return {"error": error.get_dbus_name()}
    return None


def last_count(process):
    """The peer's latest count or final event ({} before the first)."""
    process.drain()
    counts = [event for event in process.events() if event.get("event") in ("count", "final")]
    return counts[-1] if counts else {}


def timeline(process, key):
    """[seconds, count] of each of the peer's count events: when its values arrived."""
    return [[event.get("seconds"), event.get(key)] for event in process.events()
            if event.get("event") in ("count", "final")]


def busy_rate(process, key):
    """`key` per second while the peer's delegate or callback was busy: from its first count
    event with some to the first one that reached its final total (the count events of a
    Python peer come late while its event loop sleeps in the callback)."""
    counts = [event for event in process.events() if event.get("event") in ("count", "final") and event.get(key)]
    if not counts:
        return None
    last = next(event for event in counts if event[key] == counts[-1][key])
    seconds = last["seconds"] - counts[0]["seconds"]
    return round((last[key] - counts[0][key]) / seconds, 1) if seconds > 0 else None


def wait_settled(process, key, seconds):
    """Waits until the peer's `key` count stayed the same for 5 s (its backlog drained), at most
    `seconds`; returns whether it settled."""
    deadline = time.monotonic() + seconds
    value, since = last_count(process).get(key), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = last_count(process).get(key)
        if now != value:
            value, since = now, time.monotonic()
        elif time.monotonic() - since >= 5:
            return True
    return False


def logged_drops(process, kind):
    text = open(process.stderr.name, "rb").read().decode(errors="replace")
    return sum(int(match) for match in DROPS[kind].findall(text)), "arrive faster" in text or "falls behind" in text


def sampled_flood(bench, args, target, step):
    """Calls step() until --slow-duration passed; reads target's memory before, at the warm-up
    and every 5 s; returns (before, warm, samples, end, daemons at warm, daemons at end, seconds)."""
    before = memory(target.process.pid)
    warm = warm_daemons = None
    samples = []
    start = time.monotonic()
    next_sample = start + 5
    while True:
        now = time.monotonic()
        if warm is None and now >= start + args.warmup:
            warm, warm_daemons = memory(target.process.pid), daemons()
        if now >= next_sample:
            samples.append(memory(target.process.pid).get("smaps_Rss"))
            next_sample += 5
        if now >= start + args.slow_duration:
            break
        step(start + args.slow_duration - now)
    return before, warm, samples, memory(target.process.pid), warm_daemons, daemons(), time.monotonic() - start


def kib(queued):
    return round(queued["OutgoingBytes"] / 1024) if queued and "OutgoingBytes" in queued else None


def growth(figures, field):
    return figures["memory_end"].get(field, 0) - figures["memory_warm"].get(field, 0)


def common_figures(side, key, before, warm, samples, end, warm_daemons, end_daemons, seconds):
    return {
        "side": side, "seconds": round(seconds, 3),
        key: end.get("smaps_Rss", 0) - warm.get("smaps_Rss", 0),
        "vmrss_growth_kib": end.get("VmRSS", 0) - warm.get("VmRSS", 0),
        "rss_before_kib": before.get("VmRSS"), "rss_warm_kib": warm.get("VmRSS"), "rss_end_kib": end.get("VmRSS"),
        "rss_samples_kib": samples, "memory_warm": warm, "memory_end": end,
        "rss_anon_growth_kib": end.get("RssAnon", 0) - warm.get("RssAnon", 0),
        "rss_file_growth_kib": end.get("RssFile", 0) - warm.get("RssFile", 0),
        "bluetoothd_growth_kib": end_daemons["bluetoothd"] - warm_daemons["bluetoothd"],
        "dbus_daemon_growth_kib": end_daemons["dbus-daemon"] - warm_daemons["dbus-daemon"],
    }


def slow_write_run(bench, args, side):
    if side == "bluezkit":
        command = [os.path.join(args.bin, "flood-peer"), "peripheral"]
    else:
        command = [args.python, os.path.join(args.python_dir, "bless_slow_peripheral.py")]
    command += ["--adapter", "hci1", "--name", NAME, "--delegate-delay-ms", str(args.delay_ms)]
    bench.forget_all()
    peer = bench.Peripheral(command, f"slow-write-{side}", args.workdir)
    try:
        peer.wait_advertising()
        device = bench.connect(NAME)
        rx = bench.characteristic(device, RX)
        fd_object, mtu = bench.interface(rx, "org.bluez.GattCharacteristic1").AcquireWrite({}, timeout=30)
        fd = fd_object.take()
        size = min(int(mtu) - 3, 510)
        chunk = (bytes(range(256)) * 2)[:size]
        os.set_blocking(fd, False)
        sent = {"writes": 0, "waits": 0, "error": None, "warm": None}

        def step(left):
            if sent["warm"] is None and left <= args.slow_duration - args.warmup:
                sent["warm"] = sent["writes"]
            if sent["error"]:
                time.sleep(min(left, 0.2))
                return
            try:
                os.write(fd, chunk)
                sent["writes"] += 1
            except BlockingIOError:
                sent["waits"] += 1
                bench.select.select([], [fd], [], min(0.1, left))
            except OSError as error:
                sent["error"] = str(error)
                log(f"  {side}: write: {error}")
            if sent["writes"] % 256 == 0:
                peer.drain()

        flood = sampled_flood(bench, args, peer, step)
        queued = bus_queue(bench, peer.process.pid)
        delivered_end = last_count(peer)
        os.close(fd)
        alive = peer.process.poll() is None
        try:
            bench.interface(device, "org.bluez.Device1").Disconnect(timeout=30)
        except bench.dbus.DBusException:
            pass
        # BlueZKit's 1024 waiting writes take 1024 delays to drain (its drop count is logged
        # once fewer than 512 wait).
        settled = wait_settled(peer, "writes", min(1100 * args.delay_ms / 1000 + 15, 150))
    finally:
        peer.stop()
    peer.drain()
    final = last_count(peer)
    dropped, warned = logged_drops(peer, "writes")
    figures = common_figures(side, "write_flood_memory_growth_kib", *flood)
    seconds = figures["seconds"]
    figures.update({
        "mtu": int(mtu), "chunk_bytes": size, "writes_sent": sent["writes"], "socket_full_waits": sent["waits"],
        "write_error": sent["error"], "peer_alive_at_end": alive,
        "writes_sent_per_second": round(sent["writes"] / seconds, 1),
        "writes_delivered_during_flood": delivered_end.get("writes"),
        "writes_delivered_per_second": busy_rate(peer, "writes"),
        "writes_delivered_in_all": final.get("writes"), "drained_after_flood": settled,
        "dropped_logged": dropped if side == "bluezkit" else None, "drop_warning": warned if side == "bluezkit" else None,
        "dbus_daemon_queue_to_peer": queued, "bus_queued_kib": kib(queued),
        "peer_stderr_tail": peer.stderr_tail(), "peer_counts": timeline(peer, "writes"),
    })
    log(f"  slow write {side}: {sent['writes']} writes of {size} B in {seconds} s "
        f"({figures['writes_sent_per_second']}/s), delegate took {figures['writes_delivered_per_second']}/s, "
        f"{final.get('writes')} in all; VmRSS {figures['rss_warm_kib']} (warm) → {figures['rss_end_kib']} KiB "
        f"(+{figures['write_flood_memory_growth_kib']}; RssAnon {growth(figures, 'RssAnon')}), samples {figures['rss_samples_kib']}; bluetoothd "
        f"+{figures['bluetoothd_growth_kib']}, dbus-daemon +{figures['dbus_daemon_growth_kib']} KiB; dropped "
        f"(logged) {figures['dropped_logged']}, drop warning {figures['drop_warning']}; dbus-daemon holds for it {queued}")
    return figures


def slow_notify_run(bench, args, side):
    bench.forget_all()
    notifier = bench.Peripheral([os.path.join(args.bin, "flood-peer"), "notifier", "--adapter", "hci1", "--name", NAME],
                                f"notifier-{side}", args.workdir)
    if side == "bluezkit":
        command = [os.path.join(args.bin, "flood-peer"), "central"]
    else:
        command = [args.python, os.path.join(args.python_dir, "bleak_slow_central.py")]
    command += ["--adapter", "hci0", "--name", NAME, "--delegate-delay-ms", str(args.delay_ms)]
    central = None
    try:
        notifier.wait_advertising()
        central = bench.Peripheral(command, f"slow-notify-{side}", args.workdir)
        central.wait_advertising(word=b'"subscribed"')
        marks = {}

        def step(left):
            if "warm" not in marks and left <= args.slow_duration - args.warmup:
                marks["warm"] = (last_count(notifier), last_count(central))
            time.sleep(min(left, 0.25))
            notifier.drain()
            central.drain()

        flood = sampled_flood(bench, args, central, step)
        queued = bus_queue(bench, central.process.pid)
        sent_end = last_count(notifier)
        delivered_end = last_count(central)
        alive = central.process.poll() is None
        notifier.stop()  # the link drops; the central's backlog drains
        settled = wait_settled(central, "notifications", 30)
    finally:
        notifier.stop()
        if central:
            central.stop()
    central.drain()
    notifier.drain()
    final = last_count(central)
    dropped, warned = logged_drops(central, "notifications")
    sent_warm = marks.get("warm", ({}, {}))[0]

    def rate(end, warm, key):
        seconds = end.get("seconds", 0) - warm.get("seconds", 0)
        return round((end.get(key, 0) - warm.get(key, 0)) / seconds, 1) if seconds > 0 else None

    figures = common_figures(side, "notification_flood_memory_growth_kib", *flood)
    figures.update({
        "value_bytes": sent_end.get("value_bytes"), "notifications_sent": sent_end.get("notifications"),
        "notifier_not_ready": sent_end.get("not_ready"), "central_alive_at_end": alive,
        "notifications_sent_per_second": rate(sent_end, sent_warm, "notifications"),
        "notifications_delivered_per_second": busy_rate(central, "notifications"),
        "notifications_delivered_during_flood": delivered_end.get("notifications"),
        "notifications_delivered_in_all": final.get("notifications"), "drained_after_flood": settled,
        "dropped_logged": dropped if side == "bluezkit" else None, "drop_warning": warned if side == "bluezkit" else None,
        "dbus_daemon_queue_to_peer": queued, "bus_queued_kib": kib(queued),
        "central_stderr_tail": central.stderr_tail(), "central_counts": timeline(central, "notifications"), "notifier_stderr_tail": notifier.stderr_tail(),
    })
    log(f"  slow notify {side}: notifier sent {figures['notifications_sent']} of {figures['value_bytes']} B "
        f"({figures['notifications_sent_per_second']}/s after the warm-up), callback took "
        f"{figures['notifications_delivered_per_second']}/s, {final.get('notifications')} in all; VmRSS "
        f"{figures['rss_warm_kib']} (warm) → {figures['rss_end_kib']} KiB "
        f"(+{figures['notification_flood_memory_growth_kib']}; RssAnon {growth(figures, 'RssAnon')}), samples {figures['rss_samples_kib']}; bluetoothd "
        f"+{figures['bluetoothd_growth_kib']}, dbus-daemon +{figures['dbus_daemon_growth_kib']} KiB; dropped "
        f"(logged) {figures['dropped_logged']}, drop warning {figures['drop_warning']}; dbus-daemon holds for it {queued}")
    return figures


FLOODS = {
    # only-name: (result key, run, headline key, rows (key, label, decimals))
    "slow-write": ("slow_write_flood", slow_write_run, "write_flood_memory_growth_kib", (
        ("write_flood_memory_growth_kib", "Rss growth warm-up → end (smaps_rollup, KiB)", 0),
        ("vmrss_growth_kib", "VmRSS growth (status, lags on Linux < 6.2, KiB)", 0),
        ("rss_anon_growth_kib", "  of it RssAnon (heap, KiB)", 0),
        ("rss_file_growth_kib", "  of it RssFile (mapped files, KiB)", 0),
        ("writes_sent_per_second", "writes sent per second", 1),
        ("writes_delivered_per_second", "writes to the delegate per second", 1),
        ("dropped_logged", "writes dropped (BlueZKit's log)", 0),
        ("rss_end_kib", "VmRSS at the end (KiB)", 0),
        ("bus_queued_kib", "queued for it in dbus-daemon at the end (KiB)", 0),
        ("bluetoothd_growth_kib", "bluetoothd VmRSS growth (KiB)", 0),
        ("dbus_daemon_growth_kib", "dbus-daemon VmRSS growth (KiB)", 0))),
    "slow-notify": ("slow_notification_flood", slow_notify_run, "notification_flood_memory_growth_kib", (
        ("notification_flood_memory_growth_kib", "Rss growth warm-up → end (smaps_rollup, KiB)", 0),
        ("vmrss_growth_kib", "VmRSS growth (status, lags on Linux < 6.2, KiB)", 0),
        ("rss_anon_growth_kib", "  of it RssAnon (heap, KiB)", 0),
        ("rss_file_growth_kib", "  of it RssFile (mapped files, KiB)", 0),
        ("notifications_sent_per_second", "notifications sent per second", 1),
        ("notifications_delivered_per_second", "notifications to the callback per second", 1),
        ("dropped_logged", "notifications dropped (BlueZKit's log)", 0),
        ("rss_end_kib", "VmRSS at the end (KiB)", 0),
        ("bus_queued_kib", "queued for it in dbus-daemon at the end (KiB)", 0),
        ("bluetoothd_growth_kib", "bluetoothd VmRSS growth (KiB)", 0),
        ("dbus_daemon_growth_kib", "dbus-daemon VmRSS growth (KiB)", 0))),
}
PYTHON_SIDE = {"slow-write": "bless", "slow-notify": "bleak"}


def run(bench, args, only, result):
    """Runs the slow floods in `only` into `result` (and its "figures")."""
    for name, (key, runner, headline, rows) in FLOODS.items():
        if name not in only:
            continue
        python = PYTHON_SIDE[name]
        log(f"{name}: {args.runs} runs each of BlueZKit and {python}, {args.slow_duration:g} s, delegate delay "
            f"{args.delay_ms} ms, Rss growth from {args.warmup:g} s to the end")
        runs = {"bluezkit": [], python: []}
        for number in range(args.runs):
            for side in (["bluezkit", python] if number % 2 == 0 else [python, "bluezkit"]):
                try:
                    runs[side].append(runner(bench, args, side))
                except SystemExit:  # die() in a run: the other runs' figures still count
                    runs[side].append({"side": side, "failed": True})
        sides = {side: {row[0]: bench.summary(values, row[0]) for row in rows} for side, values in runs.items()}
        median = lambda side, k: (sides[side][k] or {}).get("median")  # noqa: E731
        result[key] = {"delay_ms": args.delay_ms, "duration_s": args.slow_duration, "sides": sides, "runs": runs,
                       "growth_ratio_bluezkit_to_" + python: bench.ratio(median("bluezkit", headline),
                                                                         median(python, headline))}
        for side in ("bluezkit", python):
            result.setdefault("figures", {})[f"{headline}_{side}"] = median(side, headline)
            result["figures"][f"{headline}_vmrss_{side}"] = median(side, "vmrss_growth_kib")
        result["figures"][f"{headline}_ratio"] = result[key]["growth_ratio_bluezkit_to_" + python]


def print_tables(bench, args, result):
    for name, (key, _, headline, rows) in FLOODS.items():
        if key not in result:
            continue
        python = PYTHON_SIDE[name]
        print(f"\n{name} flood (delegate/callback sleeps {args.delay_ms} ms and keeps nothing; "
              f"{args.slow_duration:g} s; goal: growth ≤ 1,024 KiB)")
        print(f"  {'measure':<42} {'side':<9} {'median':>10}   {'min – max':<21}")
        for row_key, label, decimals in rows:
            for side in ("bluezkit", python):
                print(f"  {label:<42} {side:<9} {bench.cell(result[key]['sides'][side][row_key], decimals)}")
        print(f"  ratio BlueZKit / {python}: VmRSS growth {result[key]['growth_ratio_bluezkit_to_' + python]}")


def dump(path, result):
    with open(path, "w") as out:
        json.dump(result, out, indent=2)


if __name__ == "__main__":
    die("run by flood-benchmark.py --only slow-write,slow-notify")
