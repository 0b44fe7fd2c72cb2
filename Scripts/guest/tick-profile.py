#!/usr/bin/python3
"""tick-profile — where the heart-rate examples' CPU per value goes, in the emulated environment.

    Scripts/bluez-vm run [--bluez 5.82] --share DIR --timeout 400 -- \\
        Scripts/guest/tick-profile.py --bin BIN --out DIR [--side peripheral|central] [--interval-ms 20] \\
        [--count 500] [--strace-ticks 60] [--timeout 300] [-- EXTRA CENTRAL ARGUMENTS, e.g. --notify-sockets]

BIN is the release folder with heart-rate-peripheral and heart-rate-central (Scripts/benchmark builds
them: `swift build -c release --scratch-path Benchmarks/.out/swiftpm --show-bin-path`). hci0 first
forgets every device it knows; heart-rate-peripheral then notifies every --interval-ms on hci1 as
"Probe HRM" and heart-rate-central on hci0 connects to it and subscribes. --side says which is
measured (default the peripheral; the central is heart-rate-central --json with the EXTRA
arguments): between its 100th and (100 + --count)th value line ("notified" for the peripheral,
"heartRate" for the central) this samples every thread of it (/proc/PID/task/*/schedstat: ns on a
CPU; voluntary and involuntary context switches from status) and prints, per thread alive at both
ends, µs on a CPU and switches per value, and its resident memory at each tenth of the window
(growth that goes on is a leak). Then it runs `strace -f -tt` on it for --strace-ticks values
(none with 0) and writes DIR/strace-SIDE.txt: the system calls of each value, in order, by thread
(the strace slows the process: read it for what is called, not for how long). Both programs' standard
output is a pipe read here (or discarded), as in Scripts/benchmark (not the 9p share, which would
cost a round trip to the host per line). For the rate of Scripts/benchmark --only e2e, measure
the central with --interval-ms 5.

A probe for reading, not a benchmark: one run, no comparison (Scripts/benchmark --only peripheral
makes those). Every wait is bounded by --timeout (the whole probe), after which it stops what it
started and exits 1.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time

from guest_common import forget_devices, threads


def log(text):
    print(text, flush=True)


def resident_kib(pid):
    """The process's resident memory (VmRSS), KiB."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def value_lines(stream, marker, count):
    """Reads a program's output until `count` more lines with `marker` went by."""
    if count <= 0:
        return
    seen = 0
    for line in stream:
        if marker in line:
            seen += 1
            if seen == count:
                return
    raise RuntimeError("the measured program's output ended")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--interval-ms", type=int, default=20)
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--strace-ticks", type=int, default=60)
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--side", choices=("peripheral", "central"), default="peripheral")
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    peripheral_side = args.side == "peripheral"
    marker = b'"notified"' if peripheral_side else b'"heartRate"'
    started = []

    def stop_all():
        for process in reversed(started):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()

    def expired(_signum, _frame):
        stop_all()
        sys.exit(f"tick-profile: not done after {args.timeout} s")

    signal.signal(signal.SIGALRM, expired)
    signal.alarm(args.timeout)
    try:
        forget_devices()
        time.sleep(1)
        peripheral = subprocess.Popen(
            [os.path.join(args.bin, "heart-rate-peripheral"), "--adapter", "hci1", "--name", "Probe HRM",
             "--interval-ms", str(args.interval_ms), "--json"],
            stdout=subprocess.PIPE if peripheral_side else subprocess.DEVNULL, stderr=subprocess.STDOUT)
        started.append(peripheral)
        time.sleep(3)
        central = subprocess.Popen(
            [os.path.join(args.bin, "heart-rate-central"), "--adapter", "hci0", "--name", "Probe HRM", "--json",
             *args.extra], stdout=subprocess.DEVNULL if peripheral_side else subprocess.PIPE, stderr=subprocess.DEVNULL)
        started.append(central)
        measured = peripheral if peripheral_side else central
        value_lines(measured.stdout, marker, 100)
        start, start_rss = threads(measured.pid), resident_kib(measured.pid)
        # Resident memory at each tenth of the window too: growth that goes on is a leak.
        tenths = [start_rss]
        began = time.monotonic()
        for tenth in range(1, 11):
            value_lines(measured.stdout, marker, args.count // 10)
            tenths.append(resident_kib(measured.pid))
            log(f"  {tenth}/10 of the window after {time.monotonic() - began:.0f} s: {tenths[-1]} KiB resident")
        value_lines(measured.stdout, marker, args.count - 10 * (args.count // 10))
        end, end_rss = threads(measured.pid), resident_kib(measured.pid)
        log(f"heart-rate-{args.side}, {args.count} values at {args.interval_ms} ms, per value:")
        total = 0
        for tid in sorted(set(start) & set(end), key=int):
            (name, ns0, vol0, inv0), (_, ns1, vol1, inv1) = start[tid], end[tid]
            total += ns1 - ns0
            log(f"  thread {tid} {name!r}: {(ns1 - ns0) / 1e3 / args.count:.1f} µs, "
                f"{(vol1 - vol0) / args.count:.2f} voluntary and {(inv1 - inv0) / args.count:.2f} involuntary switches")
        log(f"  all threads: {total / 1e3 / args.count:.1f} µs; resident memory {start_rss} KiB at the window's "
            f"start, {end_rss} KiB at its end ({end_rss - start_rss:+d} KiB); at each tenth: {tenths}")
        if args.strace_ticks == 0:
            return
        trace = f"/run/tick-profile.{args.side}.strace"
        tracer = subprocess.Popen(["strace", "-f", "-tt", "-p", str(measured.pid), "-o", trace],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(tracer)
        value_lines(measured.stdout, marker, args.strace_ticks)
        tracer.terminate()
        tracer.wait(timeout=10)
        copy = os.path.join(args.out, f"strace-{args.side}.txt")
        shutil.copy(trace, copy)
        log(f"system calls of {args.strace_ticks} values: {copy}")
    finally:
        signal.alarm(0)
        stop_all()


if __name__ == "__main__":
    main()
