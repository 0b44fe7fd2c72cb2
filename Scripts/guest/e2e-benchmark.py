#!/usr/bin/python3
"""e2e-benchmark — BlueZKit's heart-rate central beside a bleak central, end to end.

Run by Scripts/benchmark inside the emulated BlueZ environment (Scripts/bluez-vm run);
needs bluetoothd with hci0 and hci1 powered.

  e2e-benchmark --bin DIR --python PY --bleak-central FILE [--c-central FILE] [--runs R] [--count N]
                [--extra K] [--intervals MS[,MS...]] [--calibration-count N] [--text-runs R]
                [--bleak-acquire-runs R] [--socket-runs R]
                [--latency-interval-ms MS] [--latency-count N] [--latency-runs R]
                [--bless-peripheral FILE [--c-peripheral FILE] [--peripheral-runs R]]
                [--connect-runs R] [--connect-count N] [--skip-central-runs] [--btsnoop FILE]
                [--wakeup-granularity-ns NS] [--json FILE]

1. Saturation: heart-rate-peripheral (DIR) notifies on hci1 every MS milliseconds; for
   each of --intervals (default 20,10,5) one BlueZKit and one bleak central take
   --calibration-count readings each and the rates they achieve are measured. The
   benchmark's interval is the longest one that neither central keeps up with (both below
   90 % of the offered rate; shorter ones are not tried then), else the shortest.
2. CPU: R runs (default 8), the order alternating BlueZKit, bleak, bleak, BlueZKit, ...
   With --c-central (Benchmarks/c/notify-central.c built: libdbus alone, the same StartNotify
   path and the same line per reading, the C floor) R/2 runs of it (side "c") more, interleaved
   BlueZKit, C, bleak, bleak, C, BlueZKit, ...
   Each central finds the peripheral by name on hci0, connects, subscribes to 0x2A37 and
   prints one JSON line per reading. This driver reads its standard output and samples
   /proc/PID/stat (utime + stime: every thread, exited ones included) when the first and
   the N-th "heartRate" lines arrive: CPU ms per notification = difference / (N - 1),
   the same way for every side. The centrals run on (heart-rate-central and notify-central
   --count N+K, bleak_central.py --count N --extra K) so that they still live at the N-th line.
   bleak's own process_time() over its window is kept as a cross-check. At the same two lines
   each live thread's time on a CPU and context switches (/proc/PID/task/*/schedstat, status)
   and bluetoothd's and dbus-daemon's utime + stime are sampled too: per run "threads" (by
   thread name, ms, switches and the involuntary ones among them per notification) and
   "daemons_cpu_ms_per_notification".
   Then --text-runs runs (default 2) of the BlueZKit central without --json (its human
   lines, "78 bpm, sensor contact, RR 0.77 s"), for information: what the example's
   JSON output (Foundation's JSONSerialization) costs. And --bleak-acquire-runs runs (default
   2) of the bleak central with --acquire-notify (bleak's opt-in AcquireNotify reader,
   bluez={"use_start_notify": False}), for information: the main comparison stays bleak's
   default, StartNotify. And --socket-runs runs (default 2) of the BlueZKit central with
   --notify-sockets (AcquireNotify's socket, CentralManagerOptions.usesNotifySockets), for
   information: the main comparison is BlueZKit's default, StartNotify, since 2026-12-01.
3. Latency: the peripheral again at --latency-interval-ms (default 50, no back-pressure,
   so every notification it sends has its "notified" line), --latency-runs runs per side
   (default 3, alternating) of --latency-count readings (default 60). This driver stamps
   each line of both programs with CLOCK_MONOTONIC when it reads it; the central's readings
   are aligned with the peripheral's "notified" lines by their bpm sequence; latency =
   central line - peripheral line (median per run). These runs also give the time from
   connect to the first notification: from the central's "discovered" line (both print it
   just before they ask to connect) to its first reading, stamped the same way — the link,
   bluetoothd's service discovery, the central's own discovery and subscription, and the
   wait for the peripheral's next notification (at most one interval).
4. The peripheral side (with --bless-peripheral): heart-rate-peripheral and a bless peripheral
   (same service, model and encoding) notify every --peripheral-interval-ms (default 20) on
   hci1, --peripheral-runs each (default 2, alternating), read by the BlueZKit central on hci0
   for --peripheral-count readings (default 500); the peripheral's /proc/PID/stat is sampled at
   the central's first and last reading: CPU ms per notification sent. With --c-peripheral
   (Benchmarks/c/notify-peripheral.c built: libdbus alone, the same service, flags, model,
   encoding and line per value, StartNotify's PropertiesChanged only, the C floor) as many runs
   of it (side "c") more, interleaved BlueZKit, C, bless, bless, C, BlueZKit, ...; in the
   summary peripheral_ratio_vs_c and its per-pair ratios.
5. Connect to the first notification (--connect-runs R per side, alternating): the peripheral as
   in 3., runs of --connect-count readings (default 3), the time from the central's last
   "discovered" line to its first reading, its distribution per side (median, 10th and 90th
   percentiles). With --btsnoop FILE (btmon -w's trace of every controller: Scripts/bluez-vm
   run --btsnoop writes /run/bluez-vm/btmon.snoop) each run is split by what hci0 saw
   (hci_timeline.py): asking for the link, the link, GATT set-up waiting for the peripheral or
   the central's host, the wait for the next notification, delivery; and its ATT PDUs are listed
   (att_trace). Each BlueZKit run is followed by a warm one (side "bluezkit_warm"): the same
   central again without forgetting the device, so bluetoothd has its GATT database cached and
   does no discovery — as in bleak's counted attempt, which follows a failed first attempt that
   did the discovery (see bleak_central.py). Cold against warm is not a comparison: the warm
   BlueZKit runs are bleak's like. Per run also the central's own CPU from its "discovered" line
   to its first reading and the page faults it took meanwhile (connect_cpu_ms,
   connect_minor_faults, connect_major_faults: /proc/PID/stat), medians per side in the summary.
--skip-central-runs skips phases 1 and 2 (Scripts/benchmark runs 4 and 5 in guests of their own).
Between runs: the central's link is down on both adapters and hci0 forgets the device
(Adapter1.RemoveDevice), so every run scans, connects and discovers afresh (but phase 5's warm
runs, which keep the device).

--wakeup-granularity-ns NS (a diagnostic, never for the figures) sets the guest kernel's CFS
wakeup_granularity_ns first: a woken task preempts the running one only when it has had NS less
CPU (weighted), so a large NS shows what the centrals cost when nothing preempts them. The JSON's
"scheduler" records the kernel and its wake-up knobs either way.

Prints progress on stderr and one JSON object on stdout (also to --json FILE): the runs
and the medians. Exit status 0 when every run delivered its readings.
"""

import argparse
import json
import os
import selectors
import statistics
import sys

import guest_common
import hci_timeline
from central_runs import DAEMONS, NAME, Peripheral, forget_peripheral, run_central
from guest_common import die, log

guest_common.PROGRAM = "e2e-benchmark"

def median_of(runs, side, key):
    values = [run[key] for run in runs if run["side"] == side and key in run]
    return (round(statistics.median(values), 5), min(values), max(values), len(values)) if values else None


def main():
    parser = argparse.ArgumentParser(description="BlueZKit's central beside bleak's, end to end")
    parser.add_argument("--bin", required=True, help="folder with heart-rate-peripheral and heart-rate-central")
    parser.add_argument("--python", required=True, help="a Python with bleak")
    parser.add_argument("--bleak-central", required=True)
    parser.add_argument("--c-central", help="notify-central built from Benchmarks/c/notify-central.c: the C floor (phase 2)")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--extra", type=int, default=20)
    parser.add_argument("--intervals", default="20,10,5")
    parser.add_argument("--calibration-count", type=int, default=300)
    parser.add_argument("--text-runs", type=int, default=2,
                        help="BlueZKit runs printing human lines instead of JSON, for information")
    parser.add_argument("--bleak-acquire-runs", type=int, default=2,
                        help="bleak runs with AcquireNotify instead of StartNotify, for information")
    parser.add_argument("--socket-runs", type=int, default=2,
                        help="BlueZKit runs with --notify-sockets (AcquireNotify) instead of StartNotify, for information")
    parser.add_argument("--latency-interval-ms", type=int, default=50)
    parser.add_argument("--latency-count", type=int, default=60)
    parser.add_argument("--latency-runs", type=int, default=3)
    parser.add_argument("--bless-peripheral", help="Benchmarks/python/bless_peripheral.py (phase 4)")
    parser.add_argument("--c-peripheral",
                        help="notify-peripheral built from Benchmarks/c/notify-peripheral.c: the C floor (phase 4)")
    parser.add_argument("--peripheral-runs", type=int, default=2)
    parser.add_argument("--peripheral-interval-ms", type=int, default=20)
    parser.add_argument("--peripheral-count", type=int, default=500)
    parser.add_argument("--run-timeout", type=float, default=90.0, help="seconds per run, plus count/20")
    parser.add_argument("--connect-runs", type=int, default=0,
                        help="phase 5: runs per side from connect to the first notification")
    parser.add_argument("--connect-count", type=int, default=3, help="readings per connect run")
    parser.add_argument("--skip-central-runs", action="store_true", help="skip phases 1 and 2")
    parser.add_argument("--btsnoop", help="btmon -w's file (e.g. /run/bluez-vm/btmon.snoop): phase 5's breakdown")
    parser.add_argument("--wakeup-granularity-ns", type=int,
                        help="a diagnostic: sets the guest's CFS wakeup_granularity_ns before the runs")
    parser.add_argument("--json")
    args = parser.parse_args()
    intervals = [int(value) for value in args.intervals.split(",") if value]
    if not intervals or min(intervals) < 1 or args.count < 2 or args.runs < 1:
        die("bad arguments")
    if args.runs < 2 and not args.skip_central_runs:
        die("--runs must be at least 2: BlueZKit and bleak take turns, and one run has no bleak side to compare")
    args.workdir = os.environ.get("E2E_WORKDIR") or "/run/e2e-benchmark"
    os.makedirs(args.workdir, exist_ok=True)

    if args.wakeup_granularity_ns is not None:
        guest_common.set_wakeup_granularity(args.wakeup_granularity_ns)
    selector = selectors.DefaultSelector()
    peripheral = None
    result = {"count": args.count, "calibration": [], "runs": [], "latency_runs": [], "peripheral_runs": [],
              "connect_runs": [], "scheduler": guest_common.scheduler()}
    log(f"scheduler: {result['scheduler']}")

    def start_peripheral(interval, bless=False, c=False):
        nonlocal peripheral
        if peripheral is not None:
            selector.unregister(peripheral.process.stdout)
            peripheral.stop()
        forget_peripheral()
        command = None
        if bless:
            command = [args.python, args.bless_peripheral, "--adapter", "hci1", "--name", NAME,
                       "--interval-ms", str(interval)]
        elif c:
            command = [args.c_peripheral, "--adapter", "hci1", "--name", NAME, "--interval-ms", str(interval)]
        peripheral = Peripheral(os.path.join(args.bin, "heart-rate-peripheral"), interval, args.workdir,
                                command=command, label="bless" if bless else "c-peripheral" if c else "peripheral")
        selector.register(peripheral.process.stdout, selectors.EVENT_READ, peripheral.handle)
        peripheral.wait_published(selector)

    failures = 0
    try:
        if not args.skip_central_runs:  # phases 1 and 2
            # 1. Saturation.
            chosen = None
            if len(intervals) == 1:
                chosen = intervals[0]
            else:
                for interval in sorted(intervals, reverse=True):
                    start_peripheral(interval)
                    offered = 1000 / interval
                    saturated = True
                    for side in ("bluezkit", "bleak"):
                        run = run_central(args, selector, peripheral, side, args.calibration_count, args.extra)
                        run["offered_per_s"] = offered
                        result["calibration"].append(run)
                        if "error" in run:
                            failures += 1
                            saturated = False
                            log(f"calibration {interval} ms {side}: {run['error']}")
                            continue
                        log(f"calibration {interval} ms ({offered:.0f}/s offered): {side} central "
                            f"{run['notifications_per_s']:.1f}/s, {run['cpu_ms_per_notification']:.3f} ms CPU each")
                        saturated = saturated and run["notifications_per_s"] < 0.9 * offered
                    if saturated:
                        chosen = interval
                        break
                if chosen is None:
                    chosen = min(intervals)
            result["interval_ms"] = chosen
            result["offered_per_s"] = 1000 / chosen
            log(f"CPU runs at {chosen} ms ({1000 / chosen:.0f} notifications/s offered), "
                f"{args.runs} runs of {args.count} readings")

            # 2. CPU per notification, interleaved: BlueZKit, (C,) bleak, bleak, (C,) BlueZKit, ...
            if peripheral is None or peripheral.interval_ms != chosen:
                start_peripheral(chosen)
            order = []
            for index in range(args.runs):
                side = "bluezkit" if index % 4 in (0, 3) else "bleak"
                if args.c_central and index % 4 == 3:
                    order.append("c")
                order.append(side)
                if args.c_central and index % 4 == 0:
                    order.append("c")
            for index, side in enumerate(order):
                run = run_central(args, selector, peripheral, side, args.count, args.extra, sample_threads=True)
                run["run"] = index + 1
                result["runs"].append(run)
                if "error" in run:
                    failures += 1
                    log(f"run {index + 1} {side}: {run['error']}")
                else:
                    check = run.get("self_reported_cpu_ms_per_notification")
                    log(f"run {index + 1} {side}: {run['notifications_per_s']:.1f}/s, "
                        f"{run['cpu_ms_per_notification']:.3f} ms CPU per notification"
                        + (f" (self-reported {check:.3f})" if check is not None else "")
                        + f", {run['total_s']:.1f} s in all")

            # 2b-2d. For information, at the same rate, after the interleaved runs, numbered on from them:
            # (side, runs, label, whether an error counts as a failure of the benchmark).
            number = len(order)
            for side, count, label, counted in (
                # 2b. The BlueZKit central without --json (Foundation's JSONSerialization out of the way).
                ("bluezkit-text", args.text_runs, "BlueZKit without --json", True),
                # 2c. bleak's opt-in AcquireNotify reader: an error is reported, not a failure of the benchmark.
                ("bleak-acquire", args.bleak_acquire_runs, "bleak with AcquireNotify", False),
                # 2d. BlueZKit's opt-in AcquireNotify reader (usesNotifySockets).
                ("bluezkit-socket", args.socket_runs, "BlueZKit with --notify-sockets", True),
            ):
                for index in range(count):
                    run = run_central(args, selector, peripheral, side, args.count, args.extra)
                    run["run"] = number + index + 1
                    result["runs"].append(run)
                    if "error" in run:
                        if counted:
                            failures += 1
                        log(f"run {run['run']} {side}{'' if counted else ' (not counted)'}: {run['error']}")
                    else:
                        log(f"run {run['run']} {label}: {run['notifications_per_s']:.1f}/s, "
                            f"{run['cpu_ms_per_notification']:.3f} ms CPU per notification, "
                            f"{run['total_s']:.1f} s in all")
                number += count

        # 3. Latency.
        if args.latency_runs > 0:
            start_peripheral(args.latency_interval_ms)
            for index in range(2 * args.latency_runs):
                side = "bluezkit" if index % 4 in (0, 3) else "bleak"
                run = run_central(args, selector, peripheral, side, args.latency_count, args.extra, stamp=True)
                result["latency_runs"].append(run)
                if "error" in run:
                    failures += 1
                    log(f"latency run {index + 1} {side}: {run['error']}")
                elif "latency_ms" in run:
                    log(f"latency run {index + 1} {side}: median {run['latency_ms']:.2f} ms "
                        f"({run['latency_ms_min']:.2f} - {run['latency_ms_max']:.2f}), connect to first "
                        f"reading {run.get('connect_to_first_reading_ms', float('nan')):.0f} ms")
                else:
                    log(f"latency run {index + 1} {side}: {run['latency_error']}")

        # 4. The peripheral side: heart-rate-peripheral beside bless (and the C floor: BlueZKit, C,
        # bless, bless, C, BlueZKit, ...), the BlueZKit central reading.
        if args.bless_peripheral and args.peripheral_runs > 0:
            order = []
            for index in range(2 * args.peripheral_runs):
                side = "bluezkit" if index % 4 in (0, 3) else "bless"
                if args.c_peripheral and index % 4 == 3:
                    order.append("c")
                order.append(side)
                if args.c_peripheral and index % 4 == 0:
                    order.append("c")
            for index, side in enumerate(order):
                start_peripheral(args.peripheral_interval_ms, bless=side == "bless", c=side == "c")
                run = run_central(args, selector, peripheral, "bluezkit", args.peripheral_count, args.extra,
                                  sample_peripheral=True)
                run["side"] = side
                result["peripheral_runs"].append(run)
                if "peripheral_cpu_ms_per_notification" in run:
                    log(f"peripheral run {index + 1} {side}: {run['peripheral_cpu_ms_per_notification']:.3f} ms "
                        f"CPU per notification sent ({run['notifications_per_s']:.1f}/s)")
                else:
                    failures += 1
                    log(f"peripheral run {index + 1} {side}: {run.get('error', 'no figure')}")
        # 5. Connect to the first notification, R runs per side (the peripheral as in 3.).
        if args.connect_runs > 0:
            start_peripheral(args.latency_interval_ms)

            def connect_run(index, side, label, forget=True):
                """One run, kept in the result; 1 when it reached no reading, else 0."""
                run = run_central(args, selector, peripheral, "bluezkit" if side == "bluezkit_warm" else side,
                                  args.connect_count, args.extra, stamp=True, forget=forget)
                run["side"] = side
                run["run"] = index + 1
                result["connect_runs"].append(run)
                if "connect_to_first_reading_ms" not in run:
                    log(f"connect run {index + 1} {label}: {run.get('error', 'no discovered line')}")
                    return 1
                log(f"connect run {index + 1} {label}: {run['connect_to_first_reading_ms']:.0f} ms")
                return 0

            for index in range(2 * args.connect_runs):
                side = "bluezkit" if index % 4 in (0, 3) else "bleak"
                failures += connect_run(index, side, side)
                if side == "bluezkit":
                    failures += connect_run(index, "bluezkit_warm", "bluezkit, warm", forget=False)
    finally:
        if peripheral is not None:
            peripheral.stop()

    if result["connect_runs"] and args.btsnoop:
        try:
            events = hci_timeline.read_events(args.btsnoop)
        except (OSError, ValueError) as error:
            events = None
            result["hci_error"] = str(error)
            log(f"no HCI trace: {error}")
        for run in result["connect_runs"]:
            if events is not None and "discovered_at" in run:
                run.update(hci_timeline.phases(events, run["discovered_at"], run["first_reading_at"]))
                run["att_trace"] = hci_timeline.setup_trace(events, run["discovered_at"], run["first_reading_at"])

    summary = {}
    for side in ("bluezkit", "bluezkit_warm", "bleak"):
        values = sorted(run["connect_to_first_reading_ms"] for run in result["connect_runs"]
                        if run["side"] == side and "connect_to_first_reading_ms" in run)
        if len(values) >= 2:
            deciles = statistics.quantiles(values, n=10, method="inclusive")
            summary[f"{side}_connect_distribution_ms"] = {
                "runs": len(values), "median": round(statistics.median(values), 1), "p10": round(deciles[0], 1),
                "p90": round(deciles[-1], 1), "min": values[0], "max": values[-1], "values": values}
        for phase in hci_timeline.PHASES:
            value = median_of(result["connect_runs"], side, phase)
            if value:
                summary[f"{side}_connect_{phase}"] = value
        for key in ("connect_cpu_ms", "connect_minor_faults", "connect_major_faults"):
            value = median_of(result["connect_runs"], side, key)
            if value is not None:
                summary[f"{side}_{key}"] = value
    for side in ("bluezkit", "bleak", "c", "bluezkit-text", "bleak-acquire", "bluezkit-socket"):
        for key in ("cpu_ms_per_notification", "notifications_per_s", "self_reported_cpu_ms_per_notification",
                    "driver_cpu_ms_per_notification"):
            value = median_of(result["runs"], side, key)
            if value:
                summary[f"{side.replace('-', '_')}_{key}"] = value
    # Where each side's CPU goes in the interleaved runs: the median per thread name and per daemon.
    for side in ("bluezkit", "bleak", "c"):
        runs = [run for run in result["runs"] if run["side"] == side and "threads" in run]
        if not runs:
            continue
        names = sorted({name for run in runs for name in run["threads"]})
        summary[f"{side}_threads_ms_per_notification"] = {
            name: round(statistics.median(run["threads"].get(name, {}).get("ms", 0.0) for run in runs), 5)
            for name in names}
        summary[f"{side}_switches_per_notification"] = round(statistics.median(
            sum(entry["switches"] for entry in run["threads"].values()) for run in runs), 3)
        summary[f"{side}_involuntary_switches_per_notification"] = round(statistics.median(
            sum(entry.get("involuntary_switches", 0.0) for entry in run["threads"].values()) for run in runs), 3)
        for name in DAEMONS:
            values = [run["daemons_cpu_ms_per_notification"][name] for run in runs
                      if name in run.get("daemons_cpu_ms_per_notification", {})]
            if values:
                summary[f"{side}_{name.replace('-', '_')}_cpu_ms_per_notification"] = round(statistics.median(values), 5)
        value = median_of(result["latency_runs"], side, "latency_ms")
        if value:
            summary[f"{side}_latency_ms"] = value
        value = median_of(result["latency_runs"], side, "connect_to_first_reading_ms")
        if value:
            summary[f"{side}_connect_to_first_reading_ms"] = value
    for side in ("bluezkit", "bless", "c"):
        value = median_of(result["peripheral_runs"], side, "peripheral_cpu_ms_per_notification")
        if value:
            summary[f"{side}_peripheral_cpu_ms_per_notification"] = value
    if "bluezkit_peripheral_cpu_ms_per_notification" in summary and "bless_peripheral_cpu_ms_per_notification" in summary:
        summary["peripheral_ratio"] = round(summary["bluezkit_peripheral_cpu_ms_per_notification"][0]
                                            / summary["bless_peripheral_cpu_ms_per_notification"][0], 5)
    # Against the C floor: the medians' ratio, and each BlueZKit run with the C run beside it (in order).
    if "bluezkit_peripheral_cpu_ms_per_notification" in summary and "c_peripheral_cpu_ms_per_notification" in summary:
        summary["peripheral_ratio_vs_c"] = round(summary["bluezkit_peripheral_cpu_ms_per_notification"][0]
                                                 / summary["c_peripheral_cpu_ms_per_notification"][0], 5)
        own, floor = ([run["peripheral_cpu_ms_per_notification"] for run in result["peripheral_runs"]
                       if run["side"] == side and "peripheral_cpu_ms_per_notification" in run]
                      for side in ("bluezkit", "c"))
        summary["peripheral_ratio_vs_c_per_pair"] = [round(a / b, 5) for a, b in zip(own, floor) if b > 0]
    # Per-run ratios: each BlueZKit run with the bleak run beside it (pairs in run order).
    swift = [run["cpu_ms_per_notification"] for run in result["runs"]
             if run["side"] == "bluezkit" and "cpu_ms_per_notification" in run]
    bleak = [run["cpu_ms_per_notification"] for run in result["runs"]
             if run["side"] == "bleak" and "cpu_ms_per_notification" in run]
    pairs = [a / b for a, b in zip(swift, bleak) if b > 0]
    if swift and bleak:
        summary["ratio"] = round(statistics.median(swift) / statistics.median(bleak), 5)
        summary["ratio_per_pair"] = [round(value, 5) for value in pairs]
    # The same against the C floor: each BlueZKit run with the C run beside it (B C b b C B: in order).
    floor = [run["cpu_ms_per_notification"] for run in result["runs"]
             if run["side"] == "c" and "cpu_ms_per_notification" in run]
    if swift and floor:
        summary["ratio_vs_c"] = round(statistics.median(swift) / statistics.median(floor), 5)
        summary["ratio_vs_c_per_pair"] = [round(a / b, 5) for a, b in zip(swift, floor) if b > 0]
    result["summary"] = summary
    result["failures"] = failures
    text = json.dumps(result, indent=1)
    if args.json:
        with open(args.json, "w") as output:
            output.write(text + "\n")
    print(text)
    return 0 if failures == 0 and ("ratio" in summary or args.skip_central_runs) else 1


if __name__ == "__main__":
    sys.exit(main())
