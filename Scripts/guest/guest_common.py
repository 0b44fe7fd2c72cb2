"""What the guest-side benchmark drivers (e2e-benchmark.py, gateway-benchmark.py) and probes
(tick-profile.py, one-link-profile.py) share: their log lines, BlueZ over busctl, bounded waits,
a cold start for the central and a process's CPU time and threads from /proc."""

import os
import subprocess
import sys
import time

PROGRAM = "guest"
"""The name each log line starts with: a driver sets it to its own first thing
(Scripts/benchmark shows the lines that start with "e2e-benchmark: " or "gateway-benchmark: ")."""


def log(message):
    sys.stderr.write(f"{PROGRAM}: {message}\n")
    sys.stderr.flush()


def die(message):
    log(f"error: {message}")
    sys.exit(1)


def busctl_result(*args, timeout=60):
    """busctl's output (stripped; None when it failed) and its error output."""
    result = subprocess.run(["busctl", *args], capture_output=True, text=True, timeout=timeout)
    return (result.stdout.strip() if result.returncode == 0 else None), result.stderr.strip()


def busctl(*args, check=False):
    """busctl's output (stripped), None when it failed; raises instead with check=True."""
    out, err = busctl_result(*args)
    if check and out is None:
        raise RuntimeError(f"busctl {' '.join(args)}: {err}")
    return out


def device_paths(tree, adapter):
    """The device objects of `adapter` (/org/bluez/ADAPTER/dev_...) in a `busctl --list tree` listing."""
    prefix = f"/org/bluez/{adapter}/dev_"
    return [path for path in (tree or "").split() if path.startswith(prefix) and "/" not in path[len(prefix):]]


def devices(adapter):
    return device_paths(busctl("--list", "tree", "org.bluez"), adapter)


def forget_devices():
    """Every adapter forgets every device (a cold start for the central)."""
    tree = subprocess.run(["busctl", "tree", "--list", "org.bluez"], capture_output=True, text=True).stdout.split()
    for path in sorted({p for p in tree if p.count("/") == 4 and "/dev_" in p}):
        subprocess.run(["busctl", "call", "org.bluez", path.rsplit("/", 1)[0], "org.bluez.Adapter1", "RemoveDevice",
                        "o", path], capture_output=True)


def wait_until(seconds, check, what, interval=0.2):
    """Polls `check` until it is true (True) or `seconds` passed (a warning, False)."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            log(f"warning: still not {what} after {seconds} s")
            return False
        time.sleep(interval)
    return True


def cpu_and_faults(pid):
    """(utime + stime in ticks, minor page faults, major page faults) of the whole process (all
    threads, exited ones too)."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12]), int(fields[7]), int(fields[9])  # fields 14, 15, 10, 12 of proc(5)


def cpu_ticks(pid):
    """utime + stime of the whole process (all threads, exited ones too), in ticks."""
    return cpu_and_faults(pid)[0]


def threads(pid, proc="/proc"):
    """{tid: (name, ns on a CPU, voluntary switches, involuntary switches)} of each live thread
    (tid a string; a thread that exits while it is read is left out)."""
    found = {}
    for tid in os.listdir(f"{proc}/{pid}/task"):
        task = f"{proc}/{pid}/task/{tid}"
        try:
            with open(f"{task}/comm") as comm:
                name = comm.read().strip()
            with open(f"{task}/schedstat") as schedstat:
                ns = int(schedstat.read().split()[0])
            with open(f"{task}/status") as status:
                fields = dict(line.split(":", 1) for line in status.read().splitlines())
            found[tid] = (name, ns, int(fields["voluntary_ctxt_switches"]), int(fields["nonvoluntary_ctxt_switches"]))
        except (OSError, KeyError, ValueError):
            pass
    return found


SCHED_DEBUG = "/sys/kernel/debug/sched"
# CFS's wake-up knobs (Linux 5.13 to 6.5 keep them in debugfs; EEVDF, 6.6 on, has base_slice_ns).
SCHED_KNOBS = ("wakeup_granularity_ns", "latency_ns", "min_granularity_ns", "base_slice_ns")


def scheduler(directory=SCHED_DEBUG):
    """The guest kernel's release and the scheduler knobs that decide wake-up preemption, as read
    (a knob the kernel lacks, or debugfs missing, is left out)."""
    facts = {"kernel": os.uname().release}
    for knob in SCHED_KNOBS:
        try:
            with open(os.path.join(directory, knob)) as file:
                facts[knob] = int(file.read().strip())
        except (OSError, ValueError):
            pass
    return facts


def set_wakeup_granularity(nanoseconds, directory=SCHED_DEBUG):
    """Writes CFS's wakeup_granularity_ns (a diagnostic: how much less CPU a woken task must have
    had than the running one to preempt it); dies when the kernel has no such knob."""
    path = os.path.join(directory, "wakeup_granularity_ns")
    try:
        with open(path, "w") as file:
            file.write(str(nanoseconds))
    except OSError as error:
        die(f"cannot set {path}: {error}")
