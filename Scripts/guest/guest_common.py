"""What the guest-side benchmark drivers (e2e-benchmark.py, gateway-benchmark.py) share:
their log lines, BlueZ over busctl, bounded waits and a process's CPU time from /proc."""

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


def wait_until(seconds, check, what, interval=0.2):
    """Polls `check` until it is true (True) or `seconds` passed (a warning, False)."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            log(f"warning: still not {what} after {seconds} s")
            return False
        time.sleep(interval)
    return True


def cpu_ticks(pid):
    """utime + stime of the whole process (all threads, exited ones too), in ticks."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)
