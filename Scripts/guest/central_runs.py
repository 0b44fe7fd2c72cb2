"""central_runs — one heart-rate central's run against heart-rate-peripheral, for the guest-side
drivers that compare centrals (e2e-benchmark.py, max-rate-benchmark.py).

A Peripheral (heart-rate-peripheral, bless or the C floor on hci1, its "notified" lines counted
and stamped) and run_central (BlueZKit's heart-rate-central, the C floor notify-central or the
bleak central on hci0, until its N-th reading): the central's CPU from /proc/PID/stat between its
first and N-th reading, its rate, the peripheral's notified lines in that window, and on request
its threads, the daemons' CPU and the latency against the peripheral's lines. The caller's
`args` gives bin, python, bleak_central, c_central, workdir and run_timeout."""

import json
import os
import selectors
import signal
import statistics
import subprocess
import time

from guest_common import busctl, cpu_and_faults, cpu_ticks, devices, die, log, threads, wait_until

NAME = "BlueZKit Bench"
CLK_TCK = os.sysconf("SC_CLK_TCK")
DAEMONS = ("bluetoothd", "dbus-daemon")


def daemon_pids():
    """{name: [pid, ...]} of the daemons every central's notifications go through."""
    found = {name: [] for name in DAEMONS}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as comm:
                name = comm.read().strip()
        except OSError:
            continue
        if name in found:
            found[name].append(int(entry))
    return found


def daemon_ticks(pids):
    """{name: utime + stime of its processes} (a process gone since is left out)."""
    ticks = {}
    for name, numbers in pids.items():
        total = 0
        for pid in numbers:
            try:
                total += cpu_ticks(pid)
            except OSError:
                pass
        ticks[name] = total
    return ticks


def thread_figures(start, end, notifications):
    """Per thread name (threads alive at both samples, summed by name): ms on a CPU and
    context switches per notification, the involuntary ones among them (the thread was
    preempted, not waiting), and the same of the busiest thread of that name (a thread
    inherits its creator's name: BlueZKit's reading thread is named as the libdispatch worker
    that started it)."""
    figures = {}
    for tid in set(start) & set(end):
        (_, ns0, vol0, inv0), (name, ns1, vol1, inv1) = start[tid], end[tid]
        entry = figures.setdefault(
            name, {"ms": 0.0, "switches": 0.0, "involuntary": 0.0, "threads": 0, "busiest": (0.0, 0.0, 0.0)})
        ms = (ns1 - ns0) / 1e6 / notifications
        switches = (vol1 + inv1 - vol0 - inv0) / notifications
        involuntary = (inv1 - inv0) / notifications
        entry["ms"] += ms
        entry["switches"] += switches
        entry["involuntary"] += involuntary
        entry["threads"] += 1
        entry["busiest"] = max(entry["busiest"], (ms, switches, involuntary))
    return {name: {"ms": round(entry["ms"], 5), "switches": round(entry["switches"], 3),
                   "involuntary_switches": round(entry["involuntary"], 3), "threads": entry["threads"],
                   "busiest_ms": round(entry["busiest"][0], 5), "busiest_switches": round(entry["busiest"][1], 3),
                   "busiest_involuntary_switches": round(entry["busiest"][2], 3)}
            for name, entry in sorted(figures.items())}


# --- BlueZ over busctl ------------------------------------------------------------------


def connected(path):
    return busctl("get-property", "org.bluez", path, "org.bluez.Device1", "Connected") == "b true"


def disconnected():
    """No link on either adapter."""
    wait_until(20, lambda: not any(connected(p) for p in devices("hci0")), "disconnected on hci0")
    wait_until(20, lambda: not any(connected(p) for p in devices("hci1")), "disconnected on hci1")


def forget_peripheral():
    """No link on either adapter, and hci0 has no device object left."""
    disconnected()
    for path in devices("hci0"):
        busctl("call", "org.bluez", "/org/bluez/hci0", "org.bluez.Adapter1", "RemoveDevice", "o", path)
    wait_until(10, lambda: not devices("hci0"), "forgotten on hci0")


# --- Processes ------------------------------------------------------------------------


class Reader:
    """A child's standard output read without blocking, split into lines."""

    def __init__(self, process, label):
        self.process = process
        self.label = label
        self.partial = b""
        os.set_blocking(process.stdout.fileno(), False)

    def read(self):
        """Complete lines now available (empty at EOF or when nothing is there)."""
        try:
            data = os.read(self.process.stdout.fileno(), 65536)
        except BlockingIOError:
            return []
        if not data:
            return None
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        return lines


class Peripheral:
    def __init__(self, binary, interval_ms, workdir, command=None, label="peripheral"):
        self.interval_ms = interval_ms
        self.stderr = open(os.path.join(workdir, f"{label}-{interval_ms}.err"), "wb")
        self.process = subprocess.Popen(
            command or [binary, "--adapter", "hci1", "--name", NAME, "--interval-ms", str(interval_ms), "--json"],
            stdout=subprocess.PIPE, stderr=self.stderr)
        self.reader = Reader(self.process, "peripheral")
        self.stamping = False
        self.notified = []  # (monotonic, bpm) since the last subscription, when stamping
        self.notified_count = 0
        self.events = []

    def handle(self, now):
        lines = self.reader.read()
        if lines is None:
            die(f"the peripheral exited ({self.process.poll()}); see {self.stderr.name}")
        for line in lines:
            if b'"notified"' in line:
                self.notified_count += 1
                if self.stamping:
                    self.notified.append((now, json.loads(line)["bpm"]))
            elif line:
                fields = json.loads(line)
                event = fields.get("event")
                self.events.append(event)
                # bluetoothd's battery plugin on hci0 subscribes to 0x2A19 as well, at its own time.
                if event == "subscribed" and "2A37" in fields.get("characteristic", "").upper():
                    self.notified = []
                elif event == "error":
                    log(f"peripheral: {line.decode(errors='replace')}")

    def wait_published(self, selector, seconds=60):
        deadline = time.monotonic() + seconds
        while "advertising" not in self.events and "published" not in self.events:
            if time.monotonic() > deadline:
                log(f"warning: the peripheral printed {self.events} in {seconds} s")
                return
            pump(selector, 0.2)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.stderr.close()


def pump(selector, timeout):
    now_events = selector.select(timeout)
    now = time.monotonic()
    for key, _ in now_events:
        key.data(now)


def run_central(args, selector, peripheral, side, count, extra, stamp=False, sample_peripheral=False, forget=True,
                sample_threads=False):
    """One central run; returns a dict of figures (or "error"). forget=False keeps hci0's device
    (and bluetoothd's cache of its GATT database) from the run before. sample_threads: the
    central's threads and the daemons' CPU at the first and N-th reading as well."""
    if forget:
        forget_peripheral()
    else:
        disconnected()
    marker = b'"heartRate"'
    if side == "bluezkit":
        command = [os.path.join(args.bin, "heart-rate-central"), "--adapter", "hci0", "--name", NAME,
                   "--count", str(count + extra), "--json"]
    elif side == "bluezkit-socket":  # AcquireNotify's socket (usesNotifySockets), JSON lines
        command = [os.path.join(args.bin, "heart-rate-central"), "--adapter", "hci0", "--name", NAME,
                   "--count", str(count + extra), "--notify-sockets", "--json"]
    elif side == "c":  # the C floor: libdbus alone, StartNotify, the same JSON line per reading
        command = [args.c_central, "--adapter", "hci0", "--name", NAME, "--count", str(count + extra)]
    elif side == "bluezkit-text":  # the human lines ("78 bpm, sensor contact, RR 0.77 s"): no JSON
        command = [os.path.join(args.bin, "heart-rate-central"), "--adapter", "hci0", "--name", NAME,
                   "--count", str(count + extra)]
        marker = b" bpm"
    else:
        command = [args.python, args.bleak_central, "--adapter", "hci0", "--name", NAME,
                   "--count", str(count), "--extra", str(extra)]
        if side == "bleak-acquire":
            command.append("--acquire-notify")
    stderr_path = os.path.join(args.workdir, f"{side}.err")
    peripheral.stamping = stamp
    peripheral.notified = []
    started = time.monotonic()
    wall_offset = time.time() - started  # monotonic → wall clock, the clock btmon's trace uses
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr)
    reader = Reader(process, side)
    figures = {"side": side, "interval_ms": peripheral.interval_ms, "count": count}
    readings = []  # (monotonic, bpm) when stamping
    state = {"n": 0, "eof": False, "summary": None, "first": None, "last": None, "notified0": 0,
             "discovered": None}
    daemons = daemon_pids() if sample_threads else {}

    def on_central(now):
        lines = reader.read()
        if lines is None:
            state["eof"] = True
            selector.unregister(process.stdout)
            return
        for line in lines:
            if marker in line:
                state["n"] += 1
                n = state["n"]
                if n == 1:
                    state["first"] = (now, cpu_ticks(process.pid))
                    state["first_sample"] = cpu_and_faults(process.pid)
                    state["driver0"] = time.process_time()
                    state["notified0"] = peripheral.notified_count
                    if sample_peripheral:
                        state["peripheral0"] = cpu_ticks(peripheral.process.pid)
                    if sample_threads:
                        state["threads0"], state["daemons0"] = threads(process.pid), daemon_ticks(daemons)
                if n == count:
                    state["last"] = (now, cpu_ticks(process.pid))
                    state["driver1"] = time.process_time()
                    if sample_peripheral:
                        state["peripheral1"] = cpu_ticks(peripheral.process.pid)
                    if sample_threads:
                        state["threads1"], state["daemons1"] = threads(process.pid), daemon_ticks(daemons)
                    figures["peripheral_notified_lines"] = peripheral.notified_count - state["notified0"]
                if stamp and side != "bluezkit-text":
                    readings.append((now, json.loads(line)["bpm"]))
            elif b'"discovered"' in line and state["first"] is None:
                # bleak's central tries again after a failed set-up: the last attempt counts.
                state["discovered"] = now
                state["discovered_sample"] = cpu_and_faults(process.pid)
            elif b'"summary"' in line:
                state["summary"] = json.loads(line)
            elif b'"error"' in line or line.startswith(b"error"):
                log(f"  {side}: {line.decode(errors='replace')}")

    selector.register(process.stdout, selectors.EVENT_READ, on_central)
    deadline = started + args.run_timeout + count / 20
    while not state["eof"] and time.monotonic() < deadline:
        pump(selector, 0.5)
    if not state["eof"]:
        selector.unregister(process.stdout)
        process.kill()
    try:
        status = process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()
        status = process.wait()
    process.stdout.close()
    figures["exit_status"] = status
    figures["readings"] = state["n"]
    figures["total_s"] = round(time.monotonic() - started, 3)
    if state["first"] is None or state["last"] is None:
        with open(stderr_path, "rb") as stderr:
            tail = stderr.read()[-600:].decode(errors="replace")
        figures["error"] = f"{state['n']} readings of {count} (exit {status}): {tail}"
        return figures
    (t0, c0), (t1, c1) = state["first"], state["last"]
    figures["window_s"] = round(t1 - t0, 4)
    figures["notifications_per_s"] = round((count - 1) / (t1 - t0), 2)
    figures["cpu_ticks"] = c1 - c0
    figures["cpu_ms_per_notification"] = round((c1 - c0) * 1000 / CLK_TCK / (count - 1), 5)
    # This driver's own CPU in the window (it reads the central's line and the peripheral's for
    # each value): in the guest's one vCPU it competes with the central for the CPU.
    figures["driver_cpu_ms_per_notification"] = round((state["driver1"] - state["driver0"]) * 1000 / (count - 1), 5)
    figures["first_reading_after_s"] = round(t0 - started, 3)
    if sample_peripheral and "peripheral0" in state and "peripheral1" in state:
        figures["peripheral_cpu_ms_per_notification"] = round(
            (state["peripheral1"] - state["peripheral0"]) * 1000 / CLK_TCK / (count - 1), 5)
    if "threads0" in state and "threads1" in state:
        figures["threads"] = thread_figures(state["threads0"], state["threads1"], count - 1)
        figures["daemons_cpu_ms_per_notification"] = {
            name: round((state["daemons1"][name] - state["daemons0"][name]) * 1000 / CLK_TCK / (count - 1), 5)
            for name in DAEMONS if daemons.get(name)}
    if state["discovered"] is not None:
        figures["connect_to_first_reading_ms"] = round((t0 - state["discovered"]) * 1000, 1)
        # What the central itself did meanwhile: its CPU, and the pages it touched first (its
        # code and data met for the first time fault in; a fault is costly under TCG).
        (cpu0, minor0, major0), (cpu1, minor1, major1) = state["discovered_sample"], state["first_sample"]
        figures["connect_cpu_ms"] = round((cpu1 - cpu0) * 1000 / CLK_TCK, 1)
        figures["connect_minor_faults"] = minor1 - minor0
        figures["connect_major_faults"] = major1 - major0
        if stamp:
            figures["discovered_at"] = state["discovered"] + wall_offset
            figures["first_reading_at"] = t0 + wall_offset
    if state["summary"] is not None:
        figures["self_reported_cpu_ms_per_notification"] = round(state["summary"]["cpu_ms_per_notification"], 5)
    if stamp:
        figures.update(latency(readings, list(peripheral.notified)))
    return figures


def latency(readings, notified):
    """Aligns the central's readings with the peripheral's notified lines by bpm."""
    if not readings or not notified:
        return {"latency_error": "no lines to align"}
    best = None
    for offset in range(0, max(1, len(notified) - len(readings) + 1)):
        pairs = list(zip(readings, notified[offset:]))
        matches = sum(1 for (_, a), (_, b) in pairs if a == b)
        if best is None or matches > best[0]:
            best = (matches, offset, pairs)
    matches, offset, pairs = best
    if matches < len(readings) or len(pairs) < len(readings):
        return {"latency_error": f"{matches} of {len(readings)} readings align (offset {offset})"}
    delays = [(tc - tp) * 1000 for (tc, _), (tp, _) in pairs]
    return {"latency_ms": round(statistics.median(delays), 3), "latency_ms_min": round(min(delays), 3),
            "latency_ms_max": round(max(delays), 3), "latency_offset": offset}
