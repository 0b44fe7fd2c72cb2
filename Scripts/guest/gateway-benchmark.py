#!/usr/bin/python3
"""gateway-benchmark — one central reading many heart-rate sensors, BlueZKit beside bleak.

Run by Scripts/benchmark (--only gateway) inside the emulated BlueZ environment
(Scripts/bluez-vm run --controllers 8); needs bluetoothd with hci0 … hci(C-1) powered.

  gateway-benchmark --bin DIR --python PY --bleak-gateway FILE [--links K] [--interval-ms MS]
                    [--runs R] [--one-link-runs R] [--count N] [--one-link-count N] [--warmup W]
                    [--notify-path signals|socket] [--setup-only] [--json FILE]

heart-rate-peripheral (DIR) runs on hci1 … hciK as "BlueZKit GW 1" … "BlueZKit GW K" (K = 6 by
default), each notifying every MS ms to its subscribers (default 1000: 1/s, a heart-rate sensor's
rate, 6/s in all). Faster is too much for the one TCG vCPU on 2 shared host cores: at 10/s each
(60/s in all) the guest delivered 12–19/s, and on a busier host bluetoothd answered the sixth
subscription after D-Bus's 25 s (BlueZKit's central gave up) and took over 30 s to take hci0's
links down; at 50/s each, the same already at 2 cores to itself. The central on hci0
— Benchmarks/GatewayBenchmark (DIR) or Benchmarks/python/bleak_gateway.py — connects to all K
in name order, subscribes to 0x2A37 on each and counts the notifications; it prints a "window"
line at its (W+1)-th reading after every link is subscribed and at its (W+N)-th, and this driver
samples the central's /proc/PID/stat (utime + stime, every thread) when each arrives: CPU ms per
notification = difference / (N - 1). R runs per side with K links (default 2, N = 600, W = 60),
order alternating BlueZKit, bleak, bleak, BlueZKit, …; then --one-link-runs runs per side
(default 1, N = --one-link-count, default 150, W scaled down by K) with one link (the central
connects to "BlueZKit GW 1" only; the others advertise, nobody subscribed to them): the growth
from 1 to K links is BlueZKit's CPU per notification with K over with 1. At both marks the
driver also reads every thread of the central (/proc/PID/task/*/stat) and bluetoothd's,
dbus-daemon's and btvirt's CPU: the JSON has each run's breakdown in ms per notification.

Every run has links of its own. After a run the peripherals' controllers could keep a link to
hci0 that hci0 had taken down (seen with the first version of this driver, 10/s per sensor:
`hcitool con` on hci1 … hci6 still listed hci0, their lowest free handles no longer matched
hci0's, and the next central got broken links; why is not known), so every run but
the first starts from scratch: the peripherals stop, every adapter forgets its devices
(Adapter1.RemoveDevice) and is powered off — the kernel disconnects each link it knows (btvirt
tells the other end) and forgets the rest — and on again (the kernel resets the controller and
btvirt drops whatever it still had); then the peripherals start again and the set-up below runs
again (about 2.5 minutes with K = 6). The JSON has, per run, the handles at both ends of each
of hci0's links once all are subscribed, and any link to hci0 a peripheral still lists 15 s
after hci0 disconnected.

btvirt's connection handles (the reason for the set-up below). btvirt (emulator/btdev.c, the
same in 5.66 and 5.82) gives each new link, on each of its two controllers, the lowest handle
from 42 up that the controller has free (conn_new). It tells the initiator its own handle, but
tells the other controller the initiator's handle too (le_conn_complete: cc.handle =
conn->handle is sent to conn->link->dev), and passes ACL data on under the handle the sender
used (send_acl looks the handle up among the sender's links and forwards the header as it is).
So data from a peripheral goes out under the handle its host was told, which btvirt looks up
among the peripheral controller's own links: a link works both ways only when its handle is the
same at both ends, i.e. when both controllers had the same lowest free handle when it was made.
With hci0 connecting to six fresh controllers, hci0 takes 42 … 47 and each peripheral 42: only
the first link carries the peripheral's replies (the others' are dropped, or reach the wrong
link), and ATT times out.

The work-around: before the runs, this driver links the controllers so that peripheral k holds
handles 42 … 42+K except 42+k-1 — exactly the handle hci0 will have free when it makes its k-th
link, in name order. Links are made level by level, every link of a level between two
controllers that both have that level's handle as their lowest free one: level L (handle 42+L,
L = 0 … K-1) is round L of the round-robin 1-factorization of the complete graph on hci0 and the
other controllers (an even number: K+1, or K+2 with one helper controller that only runs a
peripheral to be linked to; hci7 for K = 6), in which hci0 meets hci(L+1). Each link is made by
bluetoothd (Adapter1.ConnectDevice on the lower-numbered controller, to the other one's
heart-rate-peripheral advertising) and checked with `hcitool con` (same handle at both ends); the
set-up keeps every peripheral-to-peripheral link ("throwaway" links, 3 per level with K = 6, idle
once bluetoothd has looked at the other side's services) and takes hci0's links down again. Then
the central run makes hci0's links in name order and each gets the handle its peripheral has
free. This limits a single central to C-1 links with C controllers, C even (7 with 8 or 9
controllers); without it, to one working link.

--notify-path picks how both centrals receive: "signals" (default), StartNotify's PropertiesChanged
signals, both libraries' default; "socket", AcquireNotify's socket (GatewayBenchmark
--notify-sockets, i.e. CentralManagerOptions.usesNotifySockets, the setting documented for known
sensors on a known bluetoothd; bleak_gateway.py --acquire-notify, bleak's use_start_notify=False).

Prints progress on stderr and one JSON object on stdout (also to --json FILE): the set-up (the
handles at both ends of every link), the runs and the medians. Exit status 0 when every run
delivered its readings.
"""

import argparse
import json
import os
import re
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import time

import guest_common
from guest_common import busctl, busctl_result, cpu_ticks, devices, die, log, wait_until

guest_common.PROGRAM = "gateway-benchmark"

PREFIX = "BlueZKit GW "
CLK_TCK = os.sysconf("SC_CLK_TCK")
FIRST_HANDLE = 42


# --- BlueZ over busctl, the kernel's view over hcitool ------------------------------------


def address(adapter):
    out = busctl("get-property", "org.bluez", f"/org/bluez/{adapter}", "org.bluez.Adapter1", "Address")
    if not out:
        die(f"no address for {adapter}")
    return out.split('"')[1]


def links(adapter):
    """{peer address: handle} of the adapter's LE links, as the kernel knows them."""
    result = subprocess.run(["hcitool", "-i", adapter, "con"], capture_output=True, text=True, timeout=30)
    found = {}
    for line in result.stdout.splitlines():
        match = re.search(r"LE ([0-9A-F:]{17}) handle (\d+)", line)
        if match:
            found[match.group(1)] = int(match.group(2))
    return found


def forget_hci0(addresses, peripheral_adapters):
    """hci0 has no link and no device object left, and no peripheral a link to hci0."""
    hci0 = addresses["hci0"]
    for path in devices("hci0"):
        busctl("call", "org.bluez", path, "org.bluez.Device1", "Disconnect")
    wait_until(30, lambda: not links("hci0"), "disconnected on hci0")
    for path in devices("hci0"):
        busctl("call", "org.bluez", "/org/bluez/hci0", "org.bluez.Adapter1", "RemoveDevice", "o", path)
    wait_until(15, lambda: not devices("hci0"), "forgotten on hci0")
    stale = {}
    for adapter in peripheral_adapters:
        if not wait_until(15, lambda adapter=adapter: hci0 not in links(adapter), f"disconnected from hci0 on {adapter}"):
            stale[adapter] = links(adapter).get(hci0)
    return stale


def powered(adapter):
    return busctl("get-property", "org.bluez", f"/org/bluez/{adapter}", "org.bluez.Adapter1", "Powered") == "b true"


def power_cycle(adapters):
    """Every adapter off, then on again: no link left anywhere, in the kernel or in btvirt.

    Powering off, the kernel disconnects each link it knows (btvirt tells the other end) and
    forgets the rest; powering on, it resets the controller (btvirt drops what it still had).
    The device objects go first, so that bluetoothd starts from what it knew after the boot."""
    for adapter in adapters:
        for path in devices(adapter):
            busctl("call", "org.bluez", f"/org/bluez/{adapter}", "org.bluez.Adapter1", "RemoveDevice", "o", path)
    for adapter in adapters:
        busctl("set-property", "org.bluez", f"/org/bluez/{adapter}", "org.bluez.Adapter1", "Powered", "b", "false")
    wait_until(60, lambda: not any(powered(adapter) for adapter in adapters), "powered off")
    for attempt in range(3):
        for adapter in adapters:
            if not powered(adapter):
                busctl("set-property", "org.bluez", f"/org/bluez/{adapter}", "org.bluez.Adapter1", "Powered", "b", "true")
        if wait_until(60, lambda: all(powered(adapter) for adapter in adapters), "powered on"):
            break
    else:
        die("the adapters did not power on again")
    left = {adapter: links(adapter) for adapter in adapters if links(adapter)}
    if left:
        die(f"links left after the power cycle: {left}")


def lowest_free(adapter):
    handles = set(links(adapter).values())
    handle = FIRST_HANDLE
    while handle in handles:
        handle += 1
    return handle


def connect(initiator, target, addresses):
    """A link initiator -> target through bluetoothd; returns (initiator's handle, target's)."""
    peer = addresses[target]
    out, err = busctl_result("call", "org.bluez", f"/org/bluez/{initiator}", "org.bluez.Adapter1", "ConnectDevice",
                             "a{sv}", "2", "Address", "s", peer, "AddressType", "s", "public")
    if out is None:  # known already: Device1.Connect
        path = f"/org/bluez/{initiator}/dev_{peer.replace(':', '_')}"
        out, err = busctl_result("call", "org.bluez", path, "org.bluez.Device1", "Connect")
        if out is None and "Already Connected" not in err:
            log(f"  {initiator} -> {target}: {err}")
    wait_until(40, lambda: peer in links(initiator) and addresses[initiator] in links(target),
               f"linked {initiator} -> {target}")
    return links(initiator).get(peer), links(target).get(addresses[initiator])


def without_eatt(adapters):
    """Restarts bluetoothd with [GATT] Channels = 1 (its own command line plus -f FILE).

    bluetoothd opens enhanced ATT channels (L2CAP credit-based, PSM 0x27) beside the fixed one
    on every link; in this environment responses come back on the wrong one of them ("Failed to
    handle response PDU", then 30 s ATT timeouts), and a CCC write sent on such a channel fails
    the central's StartNotify (seen with 6 links on every run). With one channel per link
    bluetoothd keeps to the fixed ATT channel, for both centrals alike."""
    def is_bluetoothd(pid):
        try:
            parts = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            return False
        return any(part == b"bluetoothd" or part.endswith(b"/bluetoothd") for part in parts)
    pids = [pid for pid in os.listdir("/proc") if pid.isdigit() and is_bluetoothd(pid)]
    if len(pids) != 1:
        die(f"expected one bluetoothd, found {len(pids)}")
    command = [part.decode() for part in open(f"/proc/{pids[0]}/cmdline", "rb").read().split(b"\0")[:-1]]
    config = "/run/gateway-benchmark-main.conf"
    with open(config, "w") as conf:
        conf.write("[GATT]\nChannels = 1\n")
    os.kill(int(pids[0]), signal.SIGTERM)
    wait_until(20, lambda: not os.path.exists(f"/proc/{pids[0]}"), "bluetoothd stopped")
    log_file = open("/run/bluez-vm/bluetoothd.log", "ab")
    subprocess.Popen([*command, "-f", config], stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)

    def powered():
        return all(busctl("get-property", "org.bluez", f"/org/bluez/{adapter}", "org.bluez.Adapter1",
                          "Powered") == "b true" for adapter in adapters)
    if not wait_until(60, powered, "powered again after the restart of bluetoothd"):
        die("bluetoothd did not come back")
    log(f"bluetoothd restarted without EATT: {' '.join(command)} -f {config}")


def rounds(nodes):
    """The round-robin 1-factorization of the complete graph on nodes[0] (fixed) and the others
    (an even number of nodes in all): round r pairs nodes[0] with nodes[r + 1]."""
    ring = nodes[1:]
    size = len(ring)
    result = []
    for r in range(size):
        pairs = [(nodes[0], ring[r])]
        for i in range(1, size // 2 + 1):
            a, b = ring[(r + i) % size], ring[(r - i) % size]
            pairs.append((min(a, b, key=nodes.index), max(a, b, key=nodes.index)))
        result.append(pairs)
    return result


# --- Processes ------------------------------------------------------------------------


def thread_ticks(pid):
    """{"name tid": utime + stime} of each live thread of the process, in ticks."""
    found = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as stat:
                text = stat.read()
        except OSError:
            continue
        name = text[text.index(b"(") + 1:text.rindex(b")")].decode(errors="replace")
        fields = text.rsplit(b")", 1)[1].split()
        found[f"{name} {tid}"] = int(fields[11]) + int(fields[12])
    return found


def pids_of(program):
    """The processes whose command line runs PROGRAM (its file name)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            parts = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if parts and os.path.basename(parts[0]) == program.encode():
            found.append(int(pid))
    return found


def sample(pid):
    """The central's CPU (whole process, and per thread) and the daemons' in the path."""
    total, threads = cpu_ticks(pid), thread_ticks(pid)
    others = {}
    for program in ("bluetoothd", "dbus-daemon", "btvirt"):
        ticks = 0
        for other in pids_of(program):
            try:
                ticks += cpu_ticks(other)
            except OSError:
                pass
        others[program] = ticks
    return total, threads, others


def start_peripherals(args, adapters, names):
    """heart-rate-peripheral on each adapter; their output goes to files in the guest's tmpfs."""
    processes = []
    for adapter, name in zip(adapters, names):
        output = open(os.path.join(args.workdir, f"peripheral-{adapter}.out"), "wb")
        process = subprocess.Popen(
            [os.path.join(args.bin, "heart-rate-peripheral"), "--adapter", adapter, "--name", name,
             "--interval-ms", str(args.interval_ms), "--json"], stdout=output, stderr=subprocess.STDOUT)
        processes.append((process, output))
    for adapter, (process, output) in zip(adapters, processes):
        path = output.name
        ok = wait_until(60, lambda path=path: b'"advertising"' in open(path, "rb").read(4096) or
                        process.poll() is not None, f"advertising on {adapter}")
        if not ok or process.poll() is not None:
            die(f"heart-rate-peripheral on {adapter} did not start: {open(path, 'rb').read()[-400:]!r}")
    return processes


def stop(processes):
    for process, _ in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process, output in processes:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        output.close()


def run_central(args, side, link_count, addresses, peripheral_adapters):
    """One central run; returns a dict of figures (or "error")."""
    forget_hci0(addresses, peripheral_adapters)
    warmup, extra = scaled(args.warmup, args, link_count), scaled(args.extra, args, link_count)
    # At least half the offered rate, plus connecting and subscribing.
    seconds = args.run_timeout + 2 * (warmup + args_count(args, link_count) + extra) * args.interval_ms / 1000 / link_count
    common = ["--adapter", "hci0", "--prefix", PREFIX, "--links", str(link_count), "--count", str(args_count(args, link_count)),
              "--warmup", str(warmup), "--extra", str(extra), "--timeout", str(int(seconds))]
    socket = args.notify_path == "socket"
    if side == "bluezkit":
        command = [os.path.join(args.bin, "GatewayBenchmark"), *common, *(["--notify-sockets"] if socket else [])]
    else:
        command = [args.python, args.bleak_gateway, *common, *(["--acquire-notify"] if socket else [])]
    stderr_path = os.path.join(args.workdir, f"{side}-{link_count}.err")
    started = time.monotonic()
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr)
    figures = {"side": side, "links": link_count, "count": args_count(args, link_count)}
    marks = {}
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    os.set_blocking(process.stdout.fileno(), False)
    partial = b""
    deadline = started + seconds + 30
    eof = False
    while not eof and time.monotonic() < deadline:
        if not selector.select(0.5):
            continue
        try:
            data = os.read(process.stdout.fileno(), 65536)
        except BlockingIOError:
            continue
        if not data:
            eof = True
            break
        now = time.monotonic()
        lines = (partial + data).split(b"\n")
        partial = lines.pop()
        for line in lines:
            if b'"window"' in line:
                mark = json.loads(line)["mark"]
                marks[mark] = (now, *sample(process.pid))
            elif b'"summary"' in line:
                figures["summary"] = json.loads(line)
            elif b'"error"' in line:
                log(f"  {side}: {line.decode(errors='replace')}")
            elif b'"subscribed"' in line and b'"links": %d' % link_count in line:
                figures["subscribed_after_s"] = round(now - started, 2)
                # Both ends of every link of hci0 (equal when the set-up did its job).
                figures["handles"] = {adapter: (links("hci0").get(addresses[adapter]),
                                                links(adapter).get(addresses["hci0"]))
                                      for adapter in peripheral_adapters[:link_count]}
    selector.close()
    if not eof:
        process.kill()
    try:
        status = process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        status = process.wait()
    process.stdout.close()
    figures["exit_status"] = status
    figures["total_s"] = round(time.monotonic() - started, 2)
    stale = forget_hci0(addresses, peripheral_adapters)
    if stale:  # what broke the next run before each run had its own set-up
        figures["stale_links_to_hci0"] = stale
        log(f"  {side}: after hci0 disconnected, still linked to hci0: {stale} (adapter: handle)")
    if "start" not in marks or "end" not in marks or status != 0:
        with open(stderr_path, "rb") as stderr:
            tail = stderr.read()[-600:].decode(errors="replace")
        figures["error"] = f"marks {sorted(marks)}, exit {status}: {tail}"
        return figures
    (t0, c0, threads0, others0), (t1, c1, threads1, others1) = marks["start"], marks["end"]
    n = figures["count"] - 1
    # Where the central's CPU went (ms per notification): its threads alive at both marks, the
    # rest (threads that came or went, e.g. libdispatch's workers), and the daemons beside it.
    ms = 1000 / CLK_TCK / n
    breakdown = {name: round((threads1[name] - threads0[name]) * ms, 4) for name in threads1 if name in threads0}
    breakdown = dict(sorted(((k, v) for k, v in breakdown.items() if v > 0), key=lambda item: -item[1]))
    breakdown["(threads started or ended in the window)"] = round(
        (c1 - c0) * ms - sum(threads1[name] - threads0[name] for name in threads1 if name in threads0) * ms, 4)
    figures["threads_cpu_ms_per_notification"] = breakdown
    figures["daemons_cpu_ms_per_notification"] = {name: round((others1[name] - others0[name]) * ms, 4)
                                                  for name in others1}
    figures["window_s"] = round(t1 - t0, 3)
    figures["notifications_per_s"] = round(n / (t1 - t0), 2)
    figures["cpu_ticks"] = c1 - c0
    figures["cpu_ms_per_notification"] = round((c1 - c0) * 1000 / CLK_TCK / n, 5)
    summary = figures.get("summary", {})
    if "cpu_ms_per_notification" in summary:
        figures["self_reported_cpu_ms_per_notification"] = round(summary["cpu_ms_per_notification"], 5)
    if "per_link" in summary:
        figures["per_link"] = summary["per_link"]
    return figures


def args_count(args, link_count):
    return args.count if link_count > 1 else args.one_link_count


def scaled(readings, args, link_count):
    """The warm-up and the readings after the window: the same time with fewer links."""
    return readings if link_count == args.links else max(5, readings * link_count // args.links)


def median_of(runs, side, links, key):
    values = [run[key] for run in runs if run["side"] == side and run["links"] == links and key in run]
    return (round(statistics.median(values), 5), min(values), max(values), len(values)) if values else None


def main():
    parser = argparse.ArgumentParser(description="one central reading many sensors, BlueZKit beside bleak")
    parser.add_argument("--bin", required=True, help="folder with heart-rate-peripheral and GatewayBenchmark")
    parser.add_argument("--python", help="a Python with bleak")
    parser.add_argument("--bleak-gateway", help="Benchmarks/python/bleak_gateway.py")
    parser.add_argument("--links", type=int, default=6)
    parser.add_argument("--interval-ms", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--one-link-runs", type=int, default=1)
    parser.add_argument("--count", type=int, default=600)
    parser.add_argument("--one-link-count", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=60)
    parser.add_argument("--extra", type=int, default=30)
    parser.add_argument("--run-timeout", type=float, default=240.0, help="seconds per run, plus twice the readings' time")
    parser.add_argument("--notify-path", choices=("signals", "socket"), default="signals",
                        help="how both centrals receive: StartNotify's PropertiesChanged signals (both libraries' "
                        "default) or AcquireNotify's socket (GatewayBenchmark --notify-sockets, bleak_gateway.py "
                        "--acquire-notify)")
    parser.add_argument("--setup-only", action="store_true", help="link the controllers, print the handles, stop")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.links < 1 or args.count < 2 or args.one_link_count < 2 or args.runs < 0:
        die("bad arguments")
    if not args.setup_only and (not args.python or not args.bleak_gateway):
        die("--python and --bleak-gateway are needed for the runs")
    args.workdir = os.environ.get("GATEWAY_WORKDIR") or "/run/gateway-benchmark"
    os.makedirs(args.workdir, exist_ok=True)

    nodes_needed = args.links + 1 + (args.links + 1) % 2
    controllers = int(os.environ.get("BLUEZKIT_CONTROLLERS", "2"))
    if controllers < nodes_needed:
        die(f"{args.links} links need {nodes_needed} controllers (bluez-vm run --controllers {nodes_needed}), "
            f"not {controllers}")
    adapters = [f"hci{index}" for index in range(nodes_needed)]
    peripherals = adapters[1:]
    names = [f"{PREFIX}{index}" if index <= args.links else f"BlueZKit helper {index}"
             for index in range(1, len(peripherals) + 1)]
    addresses = {adapter: address(adapter) for adapter in adapters}
    result = {"links": args.links, "interval_ms": args.interval_ms, "offered_per_s": args.links * 1000 / args.interval_ms,
              "notify_path": args.notify_path,
              "controllers": nodes_needed, "setup": [], "runs": []}

    without_eatt(adapters)
    result["eatt"] = False
    failures = 0
    processes = []

    def prepare(link_count, first):
        """Fresh links for one central run: after a run, the peripherals' controllers could keep
        a link to hci0 that hci0 had disconnected (so their lowest free handles no longer matched
        hci0's), so every run but the first starts from powered-off adapters and its own set-up."""
        nonlocal processes
        t0 = time.monotonic()
        if not first:
            stop(processes)
            processes = []
            power_cycle(adapters)
        processes = start_peripherals(args, peripherals, names)
        setup = []
        mismatches = 0
        if link_count > 1:  # level by level, every link with the same handle at both ends
            for level, pairs in enumerate(rounds(adapters)[:link_count]):
                for a, b in pairs:
                    free = (lowest_free(a), lowest_free(b))
                    handles = connect(a, b, addresses)
                    setup.append({"level": level, "initiator": a, "target": b, "lowest_free": free, "handles": handles})
                    ok = handles[0] is not None and handles[0] == handles[1] == FIRST_HANDLE + level
                    mismatches += 0 if ok else 1
                    log(f"level {level}: {a} -> {b}: handles {handles[0]} / {handles[1]}{'' if ok else ' (MISMATCH)'}")
            up = {adapter: len(links(adapter)) for adapter in adapters}
            log(f"set-up: {len(setup)} links in {time.monotonic() - t0:.0f} s; {sum(up.values()) // 2} links up")
            result.setdefault("links_up_at_once", up)
        forget_hci0(addresses, peripherals)
        free = {adapter: lowest_free(adapter) for adapter in peripherals[:link_count]}
        expected = {adapter: FIRST_HANDLE + index for index, adapter in enumerate(peripherals[:link_count])}
        if free != expected:
            mismatches += 1
        log(f"ready for {link_count} link(s) in {time.monotonic() - t0:.0f} s: lowest free handles {free}"
            f"{'' if free == expected else f' (expected {expected})'}")
        result["setup"].append({"links": link_count, "seconds": round(time.monotonic() - t0, 1), "links_made": setup,
                                "free_for_hci0": free})
        return mismatches

    try:
        plan = [(args.links, args.runs)] + ([(1, args.one_link_runs)] if args.links > 1 else [])
        if args.setup_only:
            plan = [(args.links, 0)]
            failures += prepare(args.links, True)
        first = True
        for link_count, runs in plan:
            for index in range(2 * runs):
                side = "bluezkit" if index % 4 in (0, 3) else "bleak"
                if prepare(link_count, first):
                    failures += 1
                    log(f"{link_count} link(s), run {index + 1} {side}: skipped, the set-up failed")
                    first = False
                    continue
                first = False
                run = run_central(args, side, link_count, addresses, peripherals)
                run["run"] = index + 1
                result["runs"].append(run)
                if "error" in run:
                    failures += 1
                    log(f"{link_count} link(s), run {index + 1} {side}: {run['error']}")
                else:
                    log(f"{link_count} link(s), run {index + 1} {side}: {run['notifications_per_s']:.1f}/s "
                        f"({link_count * 1000 / args.interval_ms:.0f}/s offered), "
                        f"{run['cpu_ms_per_notification']:.3f} ms CPU per notification, per link {run.get('per_link')}, "
                        f"handles {run.get('handles')}, {run['total_s']:.0f} s in all")
                    log(f"  threads (ms per notification): {run.get('threads_cpu_ms_per_notification')}; "
                        f"daemons: {run.get('daemons_cpu_ms_per_notification')}")
        if args.setup_only:
            print(json.dumps(result, indent=1))
            return 1 if failures else 0
    finally:
        stop(processes)
        logdir = os.environ.get("BLUEZ_VM_LOGDIR")
        if logdir:  # the centrals' standard error, for a failed run
            for name in os.listdir(args.workdir):
                if name.endswith(".err"):
                    shutil.copy(os.path.join(args.workdir, name), logdir)

    summary = {}
    for side in ("bluezkit", "bleak"):
        for link_count in {args.links, 1}:
            for key in ("cpu_ms_per_notification", "notifications_per_s", "self_reported_cpu_ms_per_notification"):
                value = median_of(result["runs"], side, link_count, key)
                if value:
                    summary[f"{side}_{link_count}_{key}"] = value
    k = args.links
    swift = summary.get(f"bluezkit_{k}_cpu_ms_per_notification")
    bleak = summary.get(f"bleak_{k}_cpu_ms_per_notification")
    if swift and bleak:
        summary["ratio"] = round(swift[0] / bleak[0], 5)
        pairs = [a["cpu_ms_per_notification"] / b["cpu_ms_per_notification"] for a, b in zip(
            [run for run in result["runs"] if run["side"] == "bluezkit" and run["links"] == k and "cpu_ms_per_notification" in run],
            [run for run in result["runs"] if run["side"] == "bleak" and run["links"] == k and "cpu_ms_per_notification" in run])]
        summary["ratio_per_pair"] = [round(value, 5) for value in pairs]
    one = summary.get("bluezkit_1_cpu_ms_per_notification")
    if swift and one and k > 1:
        summary["growth"] = round(swift[0] / one[0], 5)
    one_bleak = summary.get("bleak_1_cpu_ms_per_notification")
    if bleak and one_bleak and k > 1:
        summary["growth_bleak"] = round(bleak[0] / one_bleak[0], 5)
    result["summary"] = summary
    result["failures"] = failures
    text = json.dumps(result, indent=1)
    if args.json:
        with open(args.json, "w") as output:
            output.write(text + "\n")
    print(text)
    return 0 if failures == 0 and "ratio" in summary else 1


if __name__ == "__main__":
    sys.exit(main())
