#!/usr/bin/python3
"""wakeup-floor — CPU per wake-up of the smallest possible reader and sender, beside BlueZKit's
paths and Python's, in the emulated BlueZ environment (one TCG vCPU).

Run by Scripts/benchmark-wakeup-floor inside Scripts/bluez-vm (dbus-daemon and bluetoothd up;
no controller is used):

  wakeup-floor.py --c-bin DIR --swift-bin FILE --python PY --python-dir DIR [--only receive,send]
                  [--runs R] [--rates 5:150,30:300] [--warmup W] [--send-count N]
                  [--send-interval-ms MS] [--destination NAME] [--json FILE]

Receive: DIR/wakeup-writer sends a 2-byte datagram (a heart-rate measurement) every 1000/RATE
ms (whole ms) on a SOCK_SEQPACKET socket pair made here, whose other end the reader inherits —
as bluetoothd writes notifications to an AcquireNotify socket. Readers: c-blocking (recv loop,
the floor) and c-epoll (epoll_wait + recv) from DIR/wakeup-reader, swift (WakeupFloor read:
BlueZ's BlueZNotifySocket into a serial queue, Data and decoding), python (asyncio add_reader
+ os.read(fd, 1024) + a bytearray callback, as bleak). For each RATE:COUNT, W warm-up
datagrams, then COUNT measured. The writer stops half an interval after datagram W and after
the last one and this driver samples the reader then (it waits for the next datagram): the
window holds exactly COUNT datagrams.
Send: every MS ms (default 20) a PropertiesChanged(Value: ay) signal on the system bus and one
JSON line to standard output (a pipe read here): c (DIR/wakeup-sender: clock_nanosleep,
libdbus send + flush, write), c-no-bus (the same without the signal: the wake-up and the line
alone, for information), swift-dispatch (WakeupFloor send dispatch: a DispatchSourceTimer,
as heart-rate-peripheral), swift-thread (WakeupFloor send thread: a clock_nanosleep thread),
python (dbus-next, an asyncio sleep loop, as bless). C and Swift address the signal to
--destination (default org.bluez, as BlueZKit's updateValue addresses bluetoothd; "" for a
broadcast, then Swift's goes through DBusConnection.send); python broadcasts (as bless). The
driver samples the sender when it reads line W and line W + N (the same point of the tick).
Signal (--only signal, --signal-rates RATE:N,..., default 200:1000, the end-to-end benchmark's
rate; 5:150 is the gateway's six links): DIR/wakeup-sender broadcasts a PropertiesChanged(Value:
ay) every 1000/RATE ms and a receiver subscribed to it takes the value and writes one JSON line
per value — what StartNotify costs a central, BlueZKit's default path. Receivers: c
(DIR/signal-receiver --lines: libdbus's read_write_dispatch loop and iterators, the floor),
swift-direct (WakeupFloor signal direct: BlueZKit's D-Bus layer, the line written on the
connection's reading thread), swift-hop (WakeupFloor signal hop: the same, the value handed to
another serial queue with async as CentralManager hands it to the delegate queue),
swift-thread (WakeupFloor signal thread: the value handed to a delivery thread of our own, which
runs the line inside the delegate queue's sync: one warm thread for the second wake-up), python
(wakeup_signal_receiver.py: dbus-fast's asyncio MessageBus, as bleak). Sampled at the
receiver's own lines W and W + N.

CPU, of the measured process only (all its threads): the sum over /proc/PID/task/* of
schedstat's first field (ns on a CPU; the main figure, µs per datagram or signal), utime +
stime of /proc/PID/stat (clock ticks, exited threads included; shown beside it), voluntary +
involuntary context switches summed over the tasks' status (per datagram: the wake-ups; the JSON and the log also
have both per thread, as name:tid), and
the thread count at both samples (a thread that exits in the window takes its schedstat and
switches with it). R runs of every variant (default 3), order alternating. Prints a table
(median, min – max per variant, ratios of medians to C's and to Python's) and writes --json.
"""

import argparse
import glob
import json
import os
import platform
import select
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import guest_common  # noqa: E402
from guest_common import die, log  # noqa: E402

guest_common.PROGRAM = "wakeup-floor"

RECEIVERS = ["c-blocking", "c-epoll", "swift", "python"]
SENDERS = ["c", "c-no-bus", "swift-dispatch", "swift-thread", "python"]
SIGNAL_RECEIVERS = ["c", "swift-direct", "swift-hop", "swift-thread", "python"]


def sample(pid):
    """The process's counters: schedstat ns, stat ticks, context switches, threads (all tasks)."""
    tasks = {}
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(f"{task}/schedstat") as schedstat:
                ns = int(schedstat.read().split()[0])
            switches = 0
            with open(f"{task}/status") as status:
                for line in status:
                    if line.startswith("Name:"):
                        name = line.split(None, 1)[1].strip() if len(line.split()) > 1 else "?"
                    elif line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        switches += int(line.split()[1])
            tasks[os.path.basename(task)] = (name, ns, switches)
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that just exited
    return {"ticks": guest_common.cpu_ticks(pid), "threads": len(tasks), "tasks": tasks}


def live_sample(process, what):
    """`sample` of a process that must still be running (one that had already exited would lose
    its threads' counters); dies otherwise."""
    taken = sample(process.pid)
    if process.poll() is not None:
        die(f"{what}: exited before its sample was taken")
    return taken


def per_item(start, end, count):
    """The window's figures per datagram or signal.

    Summed over the threads alive at the end, each from its start value (0 for a thread born in
    the window); a thread that ended in the window took its counters with it (its start values
    are not subtracted either: "exited" counts them, and the stat figure still has its time)."""
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    total_ns = total_switches = 0
    for tid, (_, end_ns, end_switches) in end["tasks"].items():
        _, start_ns, start_switches = start["tasks"].get(tid, ("", 0, 0))
        total_ns += end_ns - start_ns
        total_switches += end_switches - start_switches
    # Per thread ("name:tid", threads alive at both samples): µs and switches per item.
    by_thread = {}
    for tid, (name, ns, switches) in sorted(end["tasks"].items(), key=lambda item: int(item[0])):
        if tid in start["tasks"]:
            by_thread[f"{name}:{tid}"] = {"cpu_us": round((ns - start["tasks"][tid][1]) / 1000 / count, 2),
                                          "switches": round((switches - start["tasks"][tid][2]) / count, 3)}
    return {
        "by_thread": by_thread,
        "cpu_us": total_ns / 1000 / count,
        "cpu_us_stat": (end["ticks"] - start["ticks"]) * tick_us / count,
        "switches": total_switches / count,
        "threads": [start["threads"], end["threads"]],
        "exited": len(set(start["tasks"]) - set(end["tasks"])),
    }


class Lines:
    """Lines from a child's unbuffered stdout, each waited for with a time limit."""

    def __init__(self, stream, what):
        self.fd, self.what, self.buffer = stream.fileno(), what, b""

    def next(self, seconds=120):
        deadline = time.monotonic() + seconds
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                die(f"{self.what}: no line within {seconds} s")
            chunk = os.read(self.fd, 4096)
            if not chunk:
                die(f"{self.what}: output ended ({self.buffer!r} left)")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()


def finish(process, what, seconds=60):
    try:
        status = process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        die(f"{what} did not exit")
    if status != 0:
        die(f"{what} exited with {status}")


def receive_command(args, variant, fd):
    return {
        "c-blocking": [f"{args.c_bin}/wakeup-reader", "blocking", str(fd)],
        "c-epoll": [f"{args.c_bin}/wakeup-reader", "epoll", str(fd)],
        "swift": [args.swift_bin, "read", str(fd)],
        "python": [args.python, f"{args.python_dir}/wakeup_reader.py", str(fd)],
    }[variant]


def receive_run(args, variant, rate, count):
    interval_ms = round(1000 / rate)
    what = f"{variant} reader at {rate}/s"
    reader_end, writer_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    reader = subprocess.Popen(receive_command(args, variant, reader_end.fileno()), pass_fds=(reader_end.fileno(),),
                              stdout=subprocess.PIPE, bufsize=0)
    reader_end.close()
    reader_lines = Lines(reader.stdout, what)
    if reader_lines.next() != "ready":
        die(f"{what}: expected ready")
    writer = subprocess.Popen(
        [f"{args.c_bin}/wakeup-writer", str(writer_end.fileno()), str(interval_ms), str(args.warmup), str(count)],
        pass_fds=(writer_end.fileno(),), stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    writer_end.close()
    writer_lines = Lines(writer.stdout, "the writer")
    samples = []
    for mark in (args.warmup, args.warmup + count):
        if writer_lines.next(seconds=60 + count * interval_ms / 1000) != f"mark {mark}":
            die(f"{what}: the writer's mark {mark} missing")
        samples.append(sample(reader.pid))
        writer.stdin.write(b"go\n")
    sent = writer_lines.next()
    finish(writer, "the writer")
    received = reader_lines.next()
    finish(reader, what)
    if received.replace("received", "sent") != sent:
        die(f"{what}: {received!r}, but the writer {sent!r}")
    return per_item(samples[0], samples[1], count)


def send_command(args, variant, total):
    interval, destination = str(args.send_interval_ms), ([args.destination] if args.destination else [])
    return {
        "c": [f"{args.c_bin}/wakeup-sender", interval, str(total), *destination],
        "c-no-bus": [f"{args.c_bin}/wakeup-sender", "--no-bus", interval, str(total)],
        "swift-dispatch": [args.swift_bin, "send", "dispatch", interval, str(total), *destination],
        "swift-thread": [args.swift_bin, "send", "thread", interval, str(total), *destination],
        "python": [args.python, f"{args.python_dir}/wakeup_sender.py", interval, str(total)],
    }[variant]


def send_run(args, variant):
    count, warmup = args.send_count, args.warmup
    # Still running when the last sample is taken: the driver may read its lines a while after
    # they were written (one CPU), so a second's worth of ticks more, not a handful.
    total = warmup + count + max(5, round(1000 / args.send_interval_ms))
    what = f"{variant} sender"
    sender = subprocess.Popen(send_command(args, variant, total), stdout=subprocess.PIPE, bufsize=0)
    lines = Lines(sender.stdout, what)
    samples = []
    for number in range(1, total + 1):
        line = lines.next()
        if '"event": "notified"' not in line:
            die(f"{what}: unexpected line {line!r}")
        if number in (warmup, warmup + count):
            samples.append(live_sample(sender, what))
    finish(sender, what)
    return per_item(samples[0], samples[1], count)


def signal_command(args, variant, total):
    address = os.environ.get("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/run/dbus/system_bus_socket")
    return {
        "c": [f"{args.c_bin}/signal-receiver", "--lines", address, str(total)],
        "swift-direct": [args.swift_bin, "signal", "direct", str(total)],
        "swift-hop": [args.swift_bin, "signal", "hop", str(total)],
        "swift-thread": [args.swift_bin, "signal", "thread", str(total)],
        "python": [args.python, f"{args.python_dir}/wakeup_signal_receiver.py", str(total)],
    }[variant]


def signal_run(args, variant, rate, count):
    """One receiver of PropertiesChanged signals broadcast by the C sender at `rate`, sampled at
    its own reading lines W and W + count (the same point of processing)."""
    interval_ms = round(1000 / rate)
    # A second's worth of values after the last sample: with a handful, a receiver that writes
    # its lines from another thread (swift-hop) was often already exiting when the driver read
    # line W + N, and the sample missed its reading thread.
    total = args.warmup + count + max(5, rate)
    what = f"{variant} signal receiver at {rate}/s"
    receiver = subprocess.Popen(signal_command(args, variant, total), stdout=subprocess.PIPE, bufsize=0)
    lines = Lines(receiver.stdout, what)
    if lines.next() != "ready":
        die(f"{what}: expected ready")
    # An empty destination: a broadcast, which the receiver's match rule admits.
    sender = subprocess.Popen([f"{args.c_bin}/wakeup-sender", str(interval_ms), str(total + 5), ""],
                              stdout=subprocess.DEVNULL)
    samples = []
    for number in range(1, total + 1):
        line = lines.next(seconds=60 + interval_ms / 1000 * 10)
        if '"event": "heartRate"' not in line:
            die(f"{what}: unexpected line {line!r}")
        if number in (args.warmup, args.warmup + count):
            samples.append(live_sample(receiver, what))
    finish(receiver, what)
    finish(sender, "the signal sender", seconds=60 + 10 * interval_ms / 1000)
    return per_item(samples[0], samples[1], count)


def summary(runs):
    result = {}
    for key in ("cpu_us", "cpu_us_stat", "switches"):
        values = [run[key] for run in runs]
        result[key] = {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values}
    result["threads"] = [run["threads"] for run in runs]
    result["exited"] = [run["exited"] for run in runs]
    result["by_thread"] = [run["by_thread"] for run in runs]
    return result


def add_ratios(group, c, python):
    for figures in group.values():
        median = figures["cpu_us"]["median"]
        figures["ratio_to_c"] = median / group[c]["cpu_us"]["median"] if c in group else None
        figures["ratio_to_python"] = median / group[python]["cpu_us"]["median"] if python in group else None


def measure(variants, runs, run_one, label):
    results = {variant: [] for variant in variants}
    for run in range(runs):
        order = variants if run % 2 == 0 else list(reversed(variants))
        for variant in order:
            figures = run_one(variant)
            log(f"  {label} run {run + 1} {variant}: {figures['cpu_us']:.1f} µs "
                f"(stat {figures['cpu_us_stat']:.0f}), {figures['switches']:.2f} switches, threads {figures['threads']}, "
                f"{figures['exited']} exited")
            if len(figures["by_thread"]) > 1:
                log("    by thread: " + ", ".join(f"{name} {t['cpu_us']:.1f} µs {t['switches']:.2f} sw"
                                                 for name, t in figures["by_thread"].items()))
            results[variant].append(figures)
    return {variant: summary(values) for variant, values in results.items()}


def print_table(title, group):
    print(f"\n{title}")
    print(f"  {'variant':<15} {'µs/item median':>14}  {'min – max':<17} {'stat µs':>8} {'switches':>8} "
          f"{'× C':>6} {'× Python':>8}")
    for variant, f in group.items():
        cpu = f["cpu_us"]
        ratio_c = f"{f['ratio_to_c']:.2f}" if f["ratio_to_c"] is not None else "–"
        ratio_py = f"{f['ratio_to_python']:.2f}" if f["ratio_to_python"] is not None else "–"
        print(f"  {variant:<15} {cpu['median']:>14.1f}  {cpu['min']:>7.1f} – {cpu['max']:<7.1f} "
              f"{f['cpu_us_stat']['median']:>8.0f} {f['switches']['median']:>8.2f} {ratio_c:>6} {ratio_py:>8}")


def main():
    parser = argparse.ArgumentParser(description="the wake-up floor (see the module's docstring)")
    parser.add_argument("--c-bin", required=True)
    parser.add_argument("--swift-bin", required=True)
    parser.add_argument("--python", required=True)
    parser.add_argument("--python-dir", required=True)
    parser.add_argument("--only", default="receive,send")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rates", default="5:150,30:300")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--signal-rates", default="200:1000")
    parser.add_argument("--send-count", type=int, default=500)
    parser.add_argument("--send-interval-ms", type=int, default=20)
    parser.add_argument("--destination", default="org.bluez")
    parser.add_argument("--json")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if not only <= {"receive", "send", "signal"}:
        die("--only takes receive, send, signal")
    if not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat"):
        die("this kernel has no /proc/PID/task/TID/schedstat")
    result = {"kernel": platform.release(), "cpus": os.cpu_count(), "runs": args.runs, "warmup": args.warmup,
              "clock_ticks_per_s": os.sysconf("SC_CLK_TCK"), "receive": {}, "send": {}, "signal": {}}
    if "receive" in only:
        for pair in args.rates.split(","):
            rate, count = (int(part) for part in pair.split(":"))
            log(f"receive: {rate}/s ({round(1000 / rate)} ms), {args.warmup} + {count} datagrams, "
                f"{args.runs} runs of {', '.join(RECEIVERS)}")
            group = measure(RECEIVERS, args.runs, lambda v: receive_run(args, v, rate, count), f"{rate}/s")
            add_ratios(group, "c-blocking", "python")
            result["receive"][str(rate)] = {"interval_ms": round(1000 / rate), "count": count, "variants": group}
    if "send" in only:
        log(f"send: every {args.send_interval_ms} ms, {args.warmup} + {args.send_count} signals, "
            f"{args.runs} runs of {', '.join(SENDERS)}")
        group = measure(SENDERS, args.runs, lambda v: send_run(args, v), "send")
        add_ratios(group, "c", "python")
        result["send"] = {"interval_ms": args.send_interval_ms, "count": args.send_count,
                          "destination": args.destination, "variants": group}
    if "signal" in only:
        for pair in args.signal_rates.split(","):
            rate, count = (int(part) for part in pair.split(":"))
            log(f"signal: {rate}/s ({round(1000 / rate)} ms), {args.warmup} + {count} PropertiesChanged, "
                f"{args.runs} runs of {', '.join(SIGNAL_RECEIVERS)}")
            group = measure(SIGNAL_RECEIVERS, args.runs, lambda v: signal_run(args, v, rate, count),
                            f"signal {rate}/s")
            add_ratios(group, "c", "python")
            result["signal"][str(rate)] = {"interval_ms": round(1000 / rate), "count": count, "variants": group}
    print(f"wake-up floor: {result['kernel']}, {result['cpus']} CPU, {args.runs} runs; CPU per item is "
          "schedstat (µs, median and range); stat µs from utime+stime (ticks); switches per item")
    for rate, entry in result["receive"].items():
        print_table(f"receive {rate}/s (one datagram every {entry['interval_ms']} ms, {entry['count']} measured)",
                    entry["variants"])
    for rate, entry in result["signal"].items():
        print_table(f"signal receive {rate}/s (a PropertiesChanged every {entry['interval_ms']} ms, "
                    f"{entry['count']} measured)", entry["variants"])
    if result["send"]:
        print_table(f"send every {result['send']['interval_ms']} ms ({result['send']['count']} signals measured)",
                    result["send"]["variants"])
    sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=2)
        log(f"wrote {args.json}")


if __name__ == "__main__":
    main()
