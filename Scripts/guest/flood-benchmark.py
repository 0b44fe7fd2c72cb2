#!/usr/bin/python3
"""flood-benchmark — a BlueZKit peripheral under a central's floods, beside bless, through the
real bluetoothd of the emulated BlueZ environment (one TCG vCPU).

Run by Scripts/benchmark-flood inside Scripts/bluez-vm (dbus-daemon, bluetoothd, hci0 and hci1
powered):

  flood-benchmark.py --bin DIR --python PY --python-dir DIR [--only write,ccc,slow-write,slow-notify]
                     [--runs R] [--duration D] [--slow-duration S] [--delay-ms M] [--warmup W]
                     [--json FILE]

This driver is the central, on hci0, through bluetoothd's D-Bus API (python3-dbus, no main
loop): it discovers the peripheral by name (Adapter1.StartDiscovery, LE), Device1.Connect, waits
for ServicesResolved and finds the characteristic by UUID under the device. Between runs the
link is dropped and hci0 forgets the device (Adapter1.RemoveDevice): every run connects afresh.

Write flood (--only write): the peripheral on hci1 is DIR/uart-bridge peripheral --adapter hci1
--name NAME --json (RX takes writes without response, each echoed as a TX notification once a
central subscribes: until then the example queues the bytes) or PY DIR/bless_uart_peripheral.py
(the same service and the same queueing, with bless); R runs each (default 2), alternating.
The central calls AcquireWrite({}) on RX (a SOCK_SEQPACKET socket and the MTU) and writes
MTU - 3 (at most 510) byte chunks, non-blocking, each as soon as the socket takes it (select for writable),
for D seconds (default 20); it never subscribes to TX. The peripheral's VmRSS (/proc/PID/status)
is read before the flood, after W seconds of it (default 2) and at its end:
write_flood_rss_growth_kib = end - warm-up; also writes sent per second (whole flood), the
peak (VmHWM) and VmRSS 3 s after the link is dropped (what the peripheral still holds).
Ratios BlueZKit / bless of the medians.

CCC toggle (--only ccc): DIR/heart-rate-peripheral --adapter hci1 --name NAME --restore-id flood
--json with XDG_STATE_HOME a fresh directory, so its restoration file is
XDG_STATE_HOME/bluezkit/restoration/id-666c6f6f64.json (RestorationStore: a temporary file,
fsync, rename over the state file, fsync of the directory). The central calls StartNotify then
StopNotify on 0x2A37, each as soon as bluetoothd answered the one before (each is a CCC write on
the link that bluetoothd relays to the peripheral), for D seconds. The restoration file's writes
are counted with inotify on the directory (IN_MOVED_TO of the state file's name: every save
ends with that rename; none is missed, unlike polling the inode), in a thread:
restoration_writes_per_second_under_ccc_toggle, and toggles (StartNotify or StopNotify calls
answered) per second. R runs. bless has no counterpart: it has no state restoration.

Slow floods (--only slow-write,slow-notify, S seconds each, default 60): a peer that keeps
nothing and whose delegate sleeps M ms (default 100) per batch or value, BlueZKit's flood-peer
beside bless or bleak; see slow_flood.py.

Prints progress on stderr, the table on stdout, and writes --json FILE.
"""

import argparse
import ctypes
import json
import os
import platform
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

import dbus  # python3-dbus

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import guest_common  # noqa: E402
import slow_flood  # noqa: E402
from guest_common import die, log  # noqa: E402

guest_common.PROGRAM = "flood-benchmark"

NAME = "Flood"  # short: the name, flags and a 128-bit service UUID fit one advertisement
RX = "6e400002-b5a3-f393-e0a9-e50e24dcca9e"
MEASUREMENT = "00002a37-0000-1000-8000-00805f9b34fb"
RESTORE_ID = "flood"
STATE_FILE = "id-" + RESTORE_ID.encode().hex() + ".json"
IN_MOVED_TO, IN_CLOSE_WRITE = 0x80, 0x08

bus = dbus.SystemBus()


# --- BlueZ through bluetoothd's D-Bus API ------------------------------------------------------


def managed_objects():
    manager = dbus.Interface(bus.get_object("org.bluez", "/"), "org.freedesktop.DBus.ObjectManager")
    return manager.GetManagedObjects()


def interface(path, name):
    return dbus.Interface(bus.get_object("org.bluez", path), name)


def device_property(path, name):
    try:
        return interface(path, "org.freedesktop.DBus.Properties").Get("org.bluez.Device1", name)
    except dbus.DBusException:
        return None


def hci0_devices():
    return [str(path) for path, interfaces in managed_objects().items()
            if "org.bluez.Device1" in interfaces and str(interfaces["org.bluez.Device1"]["Adapter"]) == "/org/bluez/hci0"]


def forget_all():
    """No link on hci0, and hci0 has no device object left."""
    adapter = interface("/org/bluez/hci0", "org.bluez.Adapter1")
    for path in hci0_devices():
        try:
            interface(path, "org.bluez.Device1").Disconnect(timeout=20)
        except dbus.DBusException:
            pass
        try:
            adapter.RemoveDevice(dbus.ObjectPath(path), timeout=20)
        except dbus.DBusException as error:
            log(f"  warning: RemoveDevice {path}: {error.get_dbus_name()}")
    guest_common.wait_until(10, lambda: not hci0_devices(), "forgotten on hci0")


def connect(name, seconds=90):
    """Discovers `name` on hci0, connects and waits for ServicesResolved; returns the device path."""
    adapter = interface("/org/bluez/hci0", "org.bluez.Adapter1")
    adapter.SetDiscoveryFilter({"Transport": "le"})
    adapter.StartDiscovery()
    deadline = time.monotonic() + seconds
    path = None
    try:
        while path is None:
            if time.monotonic() > deadline:
                die(f"{name!r} not discovered on hci0 within {seconds} s")
            for candidate, interfaces in managed_objects().items():
                device = interfaces.get("org.bluez.Device1")
                if device and str(device["Adapter"]) == "/org/bluez/hci0" and str(device.get("Name", "")) == name:
                    path = str(candidate)
            time.sleep(0.2)
    finally:
        try:
            adapter.StopDiscovery()
        except dbus.DBusException:
            pass
    for attempt in range(3):
        try:
            interface(path, "org.bluez.Device1").Connect(timeout=60)
            break
        except dbus.DBusException as error:
            log(f"  Connect attempt {attempt + 1}: {error.get_dbus_name()} {error.get_dbus_message()}")
            time.sleep(1)
    else:
        die(f"cannot connect to {name!r}")
    if not guest_common.wait_until(60, lambda: bool(device_property(path, "ServicesResolved")), "services resolved"):
        die(f"{name!r}: services not resolved")
    return path


def characteristic(device, uuid):
    for path, interfaces in managed_objects().items():
        gatt = interfaces.get("org.bluez.GattCharacteristic1")
        if gatt and str(path).startswith(device + "/") and str(gatt["UUID"]).lower() == uuid:
            return str(path)
    die(f"no characteristic {uuid} under {device}")


# --- The peripheral process --------------------------------------------------------------------


class Peripheral:
    def __init__(self, command, label, workdir, env=None):
        self.label = label
        self.stderr = open(os.path.join(workdir, f"{label}.err"), "wb")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.stderr, env=env, bufsize=0)
        self.buffer = b""

    def wait_advertising(self, seconds=120, word=b'"advertising"'):
        deadline = time.monotonic() + seconds
        while word not in self.buffer:
            left = deadline - time.monotonic()
            if self.process.poll() is not None:
                die(f"{self.label} exited ({self.process.returncode}); its stderr ends: {self.stderr_tail()!r}")
            if left <= 0:
                die(f"{self.label}: no {word.decode()} after {seconds} s: {self.buffer[-300:]!r}")
            if select.select([self.process.stdout], [], [], min(left, 0.5))[0]:
                self.buffer += os.read(self.process.stdout.fileno(), 65536)
        os.set_blocking(self.process.stdout.fileno(), False)

    def drain(self):
        """Reads what it printed since (kept: a few short JSON lines a second at most)."""
        try:
            while True:
                data = os.read(self.process.stdout.fileno(), 65536)
                if not data:
                    break
                self.buffer += data
        except (BlockingIOError, OSError):
            pass

    def events(self):
        """The JSON lines it printed, parsed (others skipped)."""
        found = []
        for line in self.buffer.splitlines():
            try:
                found.append(json.loads(line))
            except ValueError:
                pass
        return found

    def stderr_tail(self):
        with open(self.stderr.name, "rb") as stderr:
            return stderr.read()[-400:].decode(errors="replace")

    def memory(self):
        """VmRSS and VmHWM in KiB."""
        fields = {}
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    fields[key] = int(value.split()[0])
        return fields

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.stderr.close()


# --- Write flood -------------------------------------------------------------------------------


def write_flood_run(args, side):
    if side == "bluezkit":
        command = [os.path.join(args.bin, "uart-bridge"), "peripheral", "--adapter", "hci1", "--name", NAME, "--json"]
    else:
        command = [args.python, os.path.join(args.python_dir, "bless_uart_peripheral.py"), "--adapter", "hci1",
                   "--name", NAME]
    forget_all()
    peripheral = Peripheral(command, f"write-{side}", args.workdir)
    try:
        peripheral.wait_advertising()
        device = connect(NAME)
        rx = characteristic(device, RX)
        fd_object, mtu = interface(rx, "org.bluez.GattCharacteristic1").AcquireWrite({}, timeout=30)
        fd = fd_object.take()
        # An attribute value is at most 512 bytes and bluetoothd <= 5.68 refuses 511 and 512:
        # bluetoothd's GATT server drops a longer Write Cmd without a word.
        size = min(int(mtu) - 3, 510)
        chunk = (bytes(range(256)) * (size // 256 + 1))[:size]
        os.set_blocking(fd, False)
        before = peripheral.memory()
        writes = errors = waits = 0
        warm = None
        start = time.monotonic()
        end = start + args.duration
        while True:
            now = time.monotonic()
            if warm is None and now >= start + args.warmup:
                warm = (peripheral.memory(), writes, now)
            if now >= end:
                break
            try:
                os.write(fd, chunk)
                writes += 1
            except BlockingIOError:
                waits += 1
                select.select([], [fd], [], min(0.1, max(0.0, end - now)))
            except OSError as error:
                errors += 1
                log(f"  {side}: write: {error}")
                break
            if writes % 256 == 0:
                peripheral.drain()  # its JSON lines never fill the pipe
        final = peripheral.memory()
        stopped = time.monotonic()
        os.close(fd)
        alive = peripheral.process.poll() is None
        interface(device, "org.bluez.Device1").Disconnect(timeout=30)
        time.sleep(3)
        after = peripheral.memory() if peripheral.process.poll() is None else {}
        peripheral.drain()
    finally:
        peripheral.stop()
    events = peripheral.events()
    received = [event["bytes"] for event in events if event.get("event") == "received"]
    if warm is None:
        die(f"{side}: the flood ended before its warm-up")
    figures = {
        "side": side, "mtu": int(mtu), "chunk_bytes": len(chunk), "writes": writes, "bytes": writes * len(chunk),
        "socket_full_waits": waits, "write_errors": errors, "peripheral_alive_at_end": alive,
        "seconds": round(stopped - start, 3),
        "writes_per_second": round(writes / (stopped - start), 1),
        "rss_before_kib": before["VmRSS"], "rss_warm_kib": warm[0]["VmRSS"], "rss_end_kib": final["VmRSS"],
        "rss_peak_kib": final["VmHWM"], "rss_after_disconnect_kib": after.get("VmRSS"),
        "write_flood_rss_growth_kib": final["VmRSS"] - warm[0]["VmRSS"],
        "bytes_after_warmup": (writes - warm[1]) * len(chunk),
        "peripheral_events": sorted({str(event.get("event")) for event in events}),
        "peripheral_bytes_received": received[-1] if received else None,
        "peripheral_stderr_tail": peripheral.stderr_tail(),
    }
    log(f"  write flood {side}: {writes} writes of {len(chunk)} B in {figures['seconds']} s "
        f"({figures['writes_per_second']}/s), VmRSS {before['VmRSS']} → {warm[0]['VmRSS']} (warm) → "
        f"{final['VmRSS']} KiB (peak {final['VmHWM']}), {figures['rss_after_disconnect_kib']} KiB 3 s after "
        f"the link dropped; {waits} socket-full waits; its events {figures['peripheral_events']}, bytes received "
        f"(bless only) {figures['peripheral_bytes_received']}")
    if not any(event.get("event") == "receiving" for event in events):
        log(f"  warning: {side} never said it received a write; its stderr ends: {figures['peripheral_stderr_tail']!r}")
    return figures


# --- CCC toggle --------------------------------------------------------------------------------


class RenameCounter(threading.Thread):
    """Counts IN_MOVED_TO of the state file in `directory` (inotify, read in this thread)."""

    def __init__(self, directory):
        super().__init__(daemon=True)
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0 or libc.inotify_add_watch(self.fd, directory.encode(), IN_MOVED_TO | IN_CLOSE_WRITE) < 0:
            die(f"inotify on {directory}: {os.strerror(ctypes.get_errno())}")
        self.renames = 0
        self.closes = 0
        self.stopping = False
        self.lock = threading.Lock()

    def run(self):
        while not self.stopping:
            if not select.select([self.fd], [], [], 0.2)[0]:
                continue
            data = os.read(self.fd, 1 << 16)
            offset = 0
            while offset + 16 <= len(data):
                _, mask, _, length = struct.unpack_from("iIII", data, offset)
                name = data[offset + 16:offset + 16 + length].split(b"\0", 1)[0].decode(errors="replace")
                offset += 16 + length
                with self.lock:
                    if mask & IN_MOVED_TO and name == STATE_FILE:
                        self.renames += 1
                    elif mask & IN_CLOSE_WRITE:
                        self.closes += 1

    def counts(self):
        with self.lock:
            return self.renames, self.closes

    def stop(self):
        self.stopping = True
        self.join(2)
        os.close(self.fd)


def ccc_toggle_run(args, run):
    state_home = tempfile.mkdtemp(prefix=f"flood-state-{run}-", dir=args.workdir)
    directory = os.path.join(state_home, "bluezkit", "restoration")
    os.makedirs(directory, mode=0o700)
    counter = RenameCounter(directory)
    counter.start()
    env = dict(os.environ, XDG_STATE_HOME=state_home)
    command = [os.path.join(args.bin, "heart-rate-peripheral"), "--adapter", "hci1", "--name", NAME,
               "--restore-id", RESTORE_ID, "--json"]
    forget_all()
    peripheral = Peripheral(command, f"ccc-{run}", args.workdir, env=env)
    try:
        peripheral.wait_advertising()
        device = connect(NAME)
        gatt = interface(characteristic(device, MEASUREMENT), "org.bluez.GattCharacteristic1")
        time.sleep(1)  # the saves of publishing and connecting are over
        writes0, closes0 = counter.counts()
        toggles = errors = 0
        error_names = {}
        start = time.monotonic()
        end = start + args.duration
        while time.monotonic() < end:
            for call in (gatt.StartNotify, gatt.StopNotify):
                try:
                    call(timeout=30)
                    toggles += 1
                except dbus.DBusException as error:
                    errors += 1
                    error_names[error.get_dbus_name()] = error_names.get(error.get_dbus_name(), 0) + 1
            peripheral.drain()
        stopped = time.monotonic()
        time.sleep(0.5)  # a save that the last toggle started
        writes1, closes1 = counter.counts()
        alive = peripheral.process.poll() is None
        interface(device, "org.bluez.Device1").Disconnect(timeout=30)
    finally:
        peripheral.stop()
        counter.stop()
        shutil.rmtree(state_home, ignore_errors=True)
    seconds = stopped - start
    figures = {
        "run": run, "seconds": round(seconds, 3), "toggles": toggles, "toggle_errors": errors,
        "toggle_error_names": error_names, "restoration_writes": writes1 - writes0,
        "restoration_temporary_files_closed": closes1 - closes0, "peripheral_alive_at_end": alive,
        "toggles_per_second": round(toggles / seconds, 2),
        "restoration_writes_per_second_under_ccc_toggle": round((writes1 - writes0) / seconds, 2),
        "restoration_writes_per_toggle": round((writes1 - writes0) / toggles, 3) if toggles else None,
    }
    log(f"  ccc toggle run {run}: {toggles} toggles in {figures['seconds']} s ({figures['toggles_per_second']}/s, "
        f"{errors} errors {error_names}), {figures['restoration_writes']} restoration file writes "
        f"({figures['restoration_writes_per_second_under_ccc_toggle']}/s)")
    return figures


# --- Summary -----------------------------------------------------------------------------------


def summary(runs, key):
    values = [run[key] for run in runs if run.get(key) is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values}


def ratio(a, b):
    return round(a / b, 3) if a is not None and b not in (None, 0) else None


def cell(figure, decimals):
    if figure is None:
        return f"{'–':>10}   {'':<21}"
    return (f"{figure['median']:>10.{decimals}f}   "
            f"{figure['min']:.{decimals}f} – {figure['max']:.{decimals}f}".ljust(36))


def main():
    parser = argparse.ArgumentParser(description="floods against the real bluetoothd (see the module's docstring)")
    parser.add_argument("--bin", required=True, help="folder with uart-bridge and heart-rate-peripheral")
    parser.add_argument("--python", required=True, help="a Python with bless")
    parser.add_argument("--python-dir", required=True, help="Benchmarks/python")
    parser.add_argument("--only", default="write,ccc")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--slow-duration", type=float, default=60)
    parser.add_argument("--delay-ms", type=int, default=100)
    parser.add_argument("--warmup", type=float, default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if not only <= {"write", "ccc", "slow-write", "slow-notify"}:
        die("--only takes write, ccc, slow-write, slow-notify")
    if args.warmup >= min(args.duration, args.slow_duration):
        die("--warmup must be shorter than --duration")
    args.workdir = tempfile.mkdtemp(prefix="flood-")
    result = {"kernel": platform.release(), "bluez": os.environ.get("BLUEZKIT_BLUEZ_VERSION", "5.66"),
              "runs": args.runs, "duration_s": args.duration, "warmup_s": args.warmup}
    if "write" in only:
        log(f"write flood: {args.runs} runs each of uart-bridge and bless, {args.duration} s, "
            f"VmRSS growth from {args.warmup} s to the end")
        runs = {"bluezkit": [], "bless": []}
        for run in range(args.runs):
            for side in (["bluezkit", "bless"] if run % 2 == 0 else ["bless", "bluezkit"]):
                runs[side].append(write_flood_run(args, side))
        sides = {side: {key: summary(values, key) for key in
                        ("write_flood_rss_growth_kib", "writes_per_second", "rss_end_kib", "rss_peak_kib",
                         "rss_after_disconnect_kib", "bytes_after_warmup")} for side, values in runs.items()}
        result["write_flood"] = {
            "sides": sides, "runs": runs,
            "rss_growth_ratio_bluezkit_to_bless": ratio(sides["bluezkit"]["write_flood_rss_growth_kib"]["median"],
                                                        sides["bless"]["write_flood_rss_growth_kib"]["median"]),
            "writes_per_second_ratio_bluezkit_to_bless": ratio(sides["bluezkit"]["writes_per_second"]["median"],
                                                               sides["bless"]["writes_per_second"]["median"]),
        }
    if "ccc" in only:
        log(f"ccc toggle: {args.runs} runs of heart-rate-peripheral --restore-id {RESTORE_ID}, {args.duration} s")
        runs = [ccc_toggle_run(args, run + 1) for run in range(args.runs)]
        result["ccc_toggle"] = {
            "runs": runs,
            "restoration_writes_per_second_under_ccc_toggle": summary(
                runs, "restoration_writes_per_second_under_ccc_toggle"),
            "toggles_per_second": summary(runs, "toggles_per_second"),
            "restoration_writes_per_toggle": summary(runs, "restoration_writes_per_toggle"),
            "bless": "no counterpart: bless has no state restoration",
        }
    figures = result["figures"] = {}
    slow_flood.run(sys.modules[__name__], args, only, result)
    shutil.rmtree(args.workdir, ignore_errors=True)
    # The headline figures, flat (medians), for comparing one run's file with another's.
    if "write_flood" in result:
        for side in ("bluezkit", "bless"):
            for key in ("write_flood_rss_growth_kib", "writes_per_second"):
                figures[f"{key}_{side}"] = result["write_flood"]["sides"][side][key]["median"]
        figures["write_flood_rss_growth_ratio"] = result["write_flood"]["rss_growth_ratio_bluezkit_to_bless"]
        figures["writes_per_second_ratio"] = result["write_flood"]["writes_per_second_ratio_bluezkit_to_bless"]
    if "ccc_toggle" in result:
        for key in ("restoration_writes_per_second_under_ccc_toggle", "toggles_per_second"):
            figures[key] = (result["ccc_toggle"][key] or {}).get("median")
    result["figures"] = figures

    print(f"flood benchmark: bluetoothd {result['bluez']}, kernel {result['kernel']}, {args.runs} runs, "
          f"{args.duration:g} s each (median, min – max)")
    if "write_flood" in result:
        flood = result["write_flood"]
        print(f"\nwrite flood (central on hci0: AcquireWrite on RX, MTU-3 byte writes without response, "
              f"no TX subscription)")
        print(f"  {'measure':<42} {'side':<9} {'median':>10}   {'min – max':<21}")
        for key, label, decimals in (
                ("write_flood_rss_growth_kib", f"VmRSS growth {args.warmup:g} s → end (KiB)", 0),
                ("writes_per_second", "writes sent per second", 1),
                ("bytes_after_warmup", "bytes written after warm-up", 0),
                ("rss_end_kib", "VmRSS at the end (KiB)", 0),
                ("rss_peak_kib", "VmHWM peak (KiB)", 0),
                ("rss_after_disconnect_kib", "VmRSS 3 s after disconnect (KiB)", 0)):
            for side in ("bluezkit", "bless"):
                print(f"  {label:<42} {side:<9} {cell(flood['sides'][side][key], decimals)}")
        growth_ratio = flood["rss_growth_ratio_bluezkit_to_bless"]
        if growth_ratio is None:
            growth_ratio = "undefined (bless's median growth is 0 KiB)"
        print(f"  ratio BlueZKit / bless: VmRSS growth {growth_ratio}, "
              f"writes per second {flood['writes_per_second_ratio_bluezkit_to_bless']}")
    if "ccc_toggle" in result:
        ccc = result["ccc_toggle"]
        print(f"\nCCC toggle (central on hci0: StartNotify/StopNotify on 0x2A37 of heart-rate-peripheral "
              f"--restore-id {RESTORE_ID})")
        print(f"  {'measure':<52} {'median':>10}   {'min – max':<21}")
        for key, label, decimals in (
                ("restoration_writes_per_second_under_ccc_toggle", "restoration file writes per second", 2),
                ("toggles_per_second", "toggles (calls answered) per second", 2),
                ("restoration_writes_per_toggle", "restoration file writes per toggle", 3)):
            print(f"  {label:<52} {cell(ccc[key], decimals)}")
        print("  bless: no counterpart (bless has no state restoration)")
    slow_flood.print_tables(sys.modules[__name__], args, result)
    sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=2)
        log(f"wrote {args.json}")


if __name__ == "__main__":
    main()
