#!/usr/bin/python3
"""one-link-profile — where a gateway central's CPU goes, one link, in the emulated environment.

    Scripts/bluez-vm run --share DIR --timeout 400 -- \\
        Scripts/guest/one-link-profile.py --bin BIN --out DIR [--interval-ms 100] [--count 200] \\
        [--python PY --bleak-gateway Benchmarks/python/bleak_gateway.py] [--side bluezkit|bleak] [--strace] \\
        [-- EXTRA CENTRAL ARGUMENTS, e.g. --notify-sockets or --acquire-notify]

BIN is the release folder with heart-rate-peripheral and GatewayBenchmark (Scripts/benchmark builds
it: `swift build -c release --scratch-path Benchmarks/.out/swiftpm --show-bin-path`). hci0 first
forgets every device it knows; heart-rate-peripheral then notifies every --interval-ms on hci1 as
"BlueZKit GW 1", and the central (GatewayBenchmark, or bleak_gateway.py with --side bleak) connects
to it on hci0 and subscribes. Between the central's two "window" lines (--count readings after 20
of warm-up) this samples every thread of the central (/proc/PID/task/*/schedstat: ns on a CPU,
and context switches) and runs `perf record -e cpu-clock` on it. Prints the central's summary
line (its own getrusage CPU per notification) and, per thread alive at both ends of the window,
ms on a CPU and switches per notification; writes DIR/perf.SIDE.data and two reports,
DIR/report.SIDE.txt (by thread name, library and symbol) and DIR/report-dso.SIDE.txt (by library).
With --strace, `strace -f -tt` runs in the window instead of perf and writes DIR/strace.SIDE.txt:
every system call of every thread, in order — what wakes the central and which thread (at one
notification a second, for one, libdispatch's manager thread re-arming its once-a-second pool
monitor timer). Per-thread figures are then inflated by strace; read it for what is called.
A probe for reading, not a benchmark: one run, no comparison (Scripts/benchmark --only gateway
makes those).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from guest_common import forget_devices, threads


def log(text):
    print(text, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--side", choices=("bluezkit", "bleak"), default="bluezkit")
    parser.add_argument("--python")
    parser.add_argument("--bleak-gateway")
    parser.add_argument("--interval-ms", type=int, default=100)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--strace", action="store_true")
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    if args.side == "bleak" and not (args.python and args.bleak_gateway):
        sys.exit("one-link-profile: --side bleak needs --python and --bleak-gateway")
    forget_devices()
    time.sleep(1)
    peripheral = subprocess.Popen(
        [os.path.join(args.bin, "heart-rate-peripheral"), "--adapter", "hci1", "--name", "BlueZKit GW 1",
         "--interval-ms", str(args.interval_ms), "--json"],
        stdout=open(os.path.join(args.out, "peripheral.out"), "wb"), stderr=subprocess.STDOUT)
    time.sleep(3)
    common = ["--adapter", "hci0", "--prefix", "BlueZKit GW ", "--links", "1", "--count", str(args.count),
              "--warmup", "20", "--extra", "5", "--timeout", "300", *args.extra]
    if args.side == "bluezkit":
        command = [os.path.join(args.bin, "GatewayBenchmark"), *common]
    else:
        command = [args.python, args.bleak_gateway, *common]
    central = subprocess.Popen(command, stdout=subprocess.PIPE,
                               stderr=open(os.path.join(args.out, f"{args.side}.err"), "wb"))
    data = os.path.join(args.out, f"perf.{args.side}.data")
    trace = f"/run/one-link-profile.{args.side}.strace"
    if args.strace:
        recorder = ["strace", "-f", "-tt", "-p", str(central.pid), "-o", trace]
    else:
        recorder = ["perf", "record", "-e", "cpu-clock", "-F", "1999", "-p", str(central.pid), "-o", data]
    marks, perf = {}, None
    for line in central.stdout:
        if b'"window"' in line:
            mark = json.loads(line)["mark"]
            marks[mark] = threads(central.pid)
            if mark == "start":
                perf = subprocess.Popen(recorder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            elif perf:
                perf.send_signal(signal.SIGINT)
                perf.wait()
        elif b'"reading"' not in line:
            log(line.decode(errors="replace").strip()[:300])
    central.wait()
    peripheral.terminate()
    peripheral.wait()
    if "start" not in marks or "end" not in marks:
        sys.exit(f"one-link-profile: the central ended ({central.returncode}) before its window closed")
    start, end = marks["start"], marks["end"]
    notifications = args.count - 1
    for tid in sorted(set(start) & set(end), key=int):
        (_, ns0, vol0, inv0), (name, ns1, vol1, inv1) = start[tid], end[tid]
        log(f"thread {tid} {name!r}: {(ns1 - ns0) / 1e6 / notifications:.3f} ms and "
            f"{(vol1 + inv1 - vol0 - inv0) / notifications:.2f} switches per notification "
            f"({(inv1 - inv0) / notifications:.2f} involuntary)")
    if args.strace:
        shutil.copy(trace, os.path.join(args.out, f"strace.{args.side}.txt"))
        return
    for sort, report in (("comm,dso,sym", "report"), ("dso", "report-dso")):
        with open(os.path.join(args.out, f"{report}.{args.side}.txt"), "wb") as output:
            subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", sort],
                           stdout=output, stderr=subprocess.STDOUT)


if __name__ == "__main__":
    main()
