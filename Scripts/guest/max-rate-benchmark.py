#!/usr/bin/python3
"""max-rate-benchmark — the highest notification rate each central keeps up with, end to end.

Run by Scripts/benchmark (--only maxrate) inside the emulated BlueZ environment (Scripts/bluez-vm
run); needs bluetoothd with hci0 and hci1 powered.

  max-rate-benchmark --bin DIR --python PY --bleak-central FILE [--c-central FILE]
                     [--intervals MS[,MS...]] [--count N] [--extra K] [--sides SIDE[,SIDE...]]
                     [--keep-up FRACTION] [--run-timeout S] [--json FILE]

heart-rate-peripheral (DIR) notifies on hci1 every MS milliseconds, for each of --intervals
(default 6,5,4,3,2: 167 to 500 notifications a second offered), longest first. At each, every
side takes one run of --count readings (default 600) on hci0, in an order that alternates from
one interval to the next:
  bluezkit          heart-rate-central --json (StartNotify: a PropertiesChanged per value)
  bluezkit-socket   heart-rate-central --json --notify-sockets (AcquireNotify's socket)
  c                 the C floor, Benchmarks/c/notify-central.c (libdbus alone, StartNotify)
  bleak             Benchmarks/python/bleak_central.py (bleak's default, StartNotify)
  bleak-acquire     the same with --acquire-notify (bleak's AcquireNotify reader)
Everything shares the guest's one vCPU: the peripheral, bluetoothd (both adapters), dbus-daemon,
the central and this driver, so the rate a central keeps up with is what is left of that CPU
after the rest — a cheaper central leaves more for the others.

A run keeps up when the central's readings between its first and N-th reading are at least
--keep-up (default 0.98) of the "notified" lines the peripheral printed in the same window: a
central that falls behind holds values back (in dbus-daemon, its socket or its own queue, or
BlueZKit's backlog drops the oldest past 128), so the peripheral's count runs ahead of the
central's. A side's max_notifications_per_s is the highest rate it received in a run that kept
up; none when no run kept up (then its best rate is reported beside it).

Prints progress on stderr and one JSON object on stdout (also to --json FILE): the runs, and per
side its maximum. Exit status 0 when every run of the BlueZKit sides delivered its readings.
"""

import argparse
import json
import os
import selectors
import sys

import guest_common
from central_runs import Peripheral, forget_peripheral, run_central
from guest_common import die, log

guest_common.PROGRAM = "max-rate-benchmark"

SIDES = ("bluezkit", "bluezkit-socket", "c", "bleak", "bleak-acquire")


def kept_up(run, keep_up):
    """Whether the run's central received at least `keep_up` of what the peripheral notified
    in the run's window (its first to its N-th reading)."""
    notified = run.get("peripheral_notified_lines")
    if "error" in run or not notified:
        return False
    return (run["count"] - 1) >= keep_up * notified


def summarize(runs, sides, keep_up):
    """Per side: the highest rate received in a run that kept up (and that run's interval), the
    best rate of any run, and how many runs kept up."""
    summary = {}
    for side in sides:
        mine = [run for run in runs if run["side"] == side and "error" not in run]
        good = [run for run in mine if kept_up(run, keep_up)]
        best = max(good, key=lambda run: run["notifications_per_s"]) if good else None
        summary[side] = {
            "max_notifications_per_s": best["notifications_per_s"] if best else None,
            "at_interval_ms": best["interval_ms"] if best else None,
            "best_notifications_per_s": max((run["notifications_per_s"] for run in mine), default=None),
            "runs_kept_up": len(good),
            "runs": len([run for run in runs if run["side"] == side]),
        }
    return summary


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="folder with heart-rate-peripheral and heart-rate-central")
    parser.add_argument("--python", required=True, help="a Python with bleak")
    parser.add_argument("--bleak-central", required=True)
    parser.add_argument("--c-central", help="notify-central built from Benchmarks/c/notify-central.c")
    parser.add_argument("--intervals", default="6,5,4,3,2")
    parser.add_argument("--count", type=int, default=600)
    parser.add_argument("--extra", type=int, default=20)
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--keep-up", type=float, default=0.98)
    parser.add_argument("--run-timeout", type=float, default=90.0, help="seconds per run, plus count/20")
    parser.add_argument("--json")
    args = parser.parse_args()
    try:
        intervals = sorted({int(value) for value in args.intervals.split(",") if value}, reverse=True)
    except ValueError:
        die("--intervals takes whole numbers of milliseconds")
    sides = [side for side in args.sides.split(",") if side]
    if not intervals or min(intervals) < 1 or args.count < 2 or not 0 < args.keep_up <= 1:
        die("bad arguments")
    if any(side not in SIDES for side in sides):
        die(f"--sides: each one of {', '.join(SIDES)}")
    if "c" in sides and not args.c_central:
        die("the c side needs --c-central")
    args.workdir = os.environ.get("E2E_WORKDIR") or "/run/max-rate-benchmark"
    os.makedirs(args.workdir, exist_ok=True)

    selector = selectors.DefaultSelector()
    peripheral = None
    runs = []
    failures = 0
    try:
        for number, interval in enumerate(intervals):
            if peripheral is not None:
                selector.unregister(peripheral.process.stdout)
                peripheral.stop()
            forget_peripheral()
            peripheral = Peripheral(os.path.join(args.bin, "heart-rate-peripheral"), interval, args.workdir)
            selector.register(peripheral.process.stdout, selectors.EVENT_READ, peripheral.handle)
            peripheral.wait_published(selector)
            offered = 1000 / interval
            for side in (sides if number % 2 == 0 else list(reversed(sides))):
                run = run_central(args, selector, peripheral, side, args.count, args.extra)
                run["offered_per_s"] = round(offered, 1)
                runs.append(run)
                if "error" in run:
                    if side.startswith("bluezkit"):
                        failures += 1
                    log(f"{interval} ms {side}: {run['error']}")
                    continue
                run["kept_up"] = kept_up(run, args.keep_up)
                log(f"{interval} ms ({offered:.0f}/s offered): {side} received {run['notifications_per_s']:.1f}/s, "
                    f"{run['count'] - 1} of {run.get('peripheral_notified_lines')} notified in its window"
                    f" ({'kept up' if run['kept_up'] else 'fell behind'}), "
                    f"{run['cpu_ms_per_notification']:.3f} ms CPU each")
    finally:
        if peripheral is not None:
            peripheral.stop()

    summary = summarize(runs, sides, args.keep_up)
    for side, figures in summary.items():
        log(f"{side}: max {figures['max_notifications_per_s']}/s kept up (at {figures['at_interval_ms']} ms), "
            f"best {figures['best_notifications_per_s']}/s, {figures['runs_kept_up']} of {figures['runs']} runs kept up")
    result = {"intervals_ms": intervals, "count": args.count, "keep_up": args.keep_up, "runs": runs,
              "summary": summary, "failures": failures}
    text = json.dumps(result, indent=1)
    if args.json:
        with open(args.json, "w") as output:
            output.write(text + "\n")
    print(text)
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
