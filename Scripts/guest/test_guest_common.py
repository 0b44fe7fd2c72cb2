"""Tests of guest_common.py's pure parts (python3 -m unittest discover -s Scripts/guest)."""

import io
import mmap
import os
import subprocess
import tempfile
import threading
import unittest
from unittest import mock

import guest_common


class DevicePathsTests(unittest.TestCase):
    def test_only_the_adapters_own_devices_and_not_their_children(self):
        tree = "\n".join([
            "/", "/org", "/org/bluez", "/org/bluez/hci0", "/org/bluez/hci0/dev_00_AA_01_01_00_01",
            "/org/bluez/hci0/dev_00_AA_01_01_00_01/service0008", "/org/bluez/hci1/dev_00_AA_01_00_00_00",
            "/org/bluez/hci10/dev_00_AA_01_0A_00_0A",
        ])
        self.assertEqual(guest_common.device_paths(tree, "hci0"), ["/org/bluez/hci0/dev_00_AA_01_01_00_01"])
        self.assertEqual(guest_common.device_paths(tree, "hci1"), ["/org/bluez/hci1/dev_00_AA_01_00_00_00"])
        self.assertEqual(guest_common.device_paths(None, "hci0"), [])


class WaitUntilTests(unittest.TestCase):
    def test_true_once_the_check_holds(self):
        calls = iter([False, False, True])
        self.assertTrue(guest_common.wait_until(5, lambda: next(calls), "ready", interval=0))

    def test_false_with_a_warning_when_it_never_holds(self):
        with mock.patch("sys.stderr", new=io.StringIO()) as err:
            self.assertFalse(guest_common.wait_until(0.05, lambda: False, "ready", interval=0.01))
        self.assertIn("warning: still not ready after 0.05 s", err.getvalue())


class CpuTicksTests(unittest.TestCase):
    def test_agrees_with_os_times_for_this_process(self):
        sum(range(5_000_000))  # some CPU time to count
        ticks = guest_common.cpu_ticks(os.getpid())
        times = os.times()
        seconds = times.user + times.system
        self.assertGreater(seconds, 0)
        self.assertAlmostEqual(ticks / os.sysconf("SC_CLK_TCK"), seconds, delta=0.05)


class ThreadsTests(unittest.TestCase):
    def test_reads_name_cpu_time_and_both_kinds_of_switches_of_each_task(self):
        with tempfile.TemporaryDirectory() as proc:
            for tid, name, ns, voluntary, involuntary in (("41", "main", 1500, 7, 2), ("42", "reader", 900, 30, 0)):
                task = os.path.join(proc, "40", "task", tid)
                os.makedirs(task)
                with open(os.path.join(task, "comm"), "w") as comm:
                    comm.write(f"{name}\n")
                with open(os.path.join(task, "schedstat"), "w") as schedstat:
                    schedstat.write(f"{ns} 123 45\n")
                with open(os.path.join(task, "status"), "w") as status:
                    status.write(f"Name:\t{name}\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t{voluntary}\n"
                                 f"nonvoluntary_ctxt_switches:\t{involuntary}\n")
            # A task that exited between the listing and the reading: left out.
            os.makedirs(os.path.join(proc, "40", "task", "43"))
            self.assertEqual(guest_common.threads(40, proc=proc),
                             {"41": ("main", 1500, 7, 2), "42": ("reader", 900, 30, 0)})

    def test_sees_this_process_own_threads(self):
        ready, done = threading.Event(), threading.Event()
        worker = threading.Thread(target=lambda: (ready.set(), done.wait()), name="probe-worker")
        worker.start()
        try:
            ready.wait()
            found = guest_common.threads(os.getpid())
        finally:
            done.set()
            worker.join()
        self.assertIn(str(threading.get_native_id()), found)
        self.assertIn(str(worker.native_id), found)
        for name, ns, voluntary, involuntary in found.values():
            self.assertIsInstance(name, str)
            for field in (ns, voluntary, involuntary):
                self.assertIsInstance(field, int)
                self.assertGreaterEqual(field, 0)


class ForgetDevicesTests(unittest.TestCase):
    def test_removes_each_adapters_devices_and_nothing_else(self):
        tree = "\n".join([
            "/", "/org", "/org/bluez", "/org/bluez/hci0", "/org/bluez/hci0/dev_00_AA_01_01_00_01",
            "/org/bluez/hci0/dev_00_AA_01_01_00_01/service0008", "/org/bluez/hci1/dev_00_AA_01_00_00_00",
        ])
        calls = []

        def run(command, **kwargs):
            calls.append(command)
            return subprocess.CompletedProcess(command, 0, stdout=tree if command[1] == "tree" else "", stderr="")

        with mock.patch("subprocess.run", side_effect=run):
            guest_common.forget_devices()
        self.assertEqual(calls, [
            ["busctl", "tree", "--list", "org.bluez"],
            ["busctl", "call", "org.bluez", "/org/bluez/hci0", "org.bluez.Adapter1", "RemoveDevice", "o",
             "/org/bluez/hci0/dev_00_AA_01_01_00_01"],
            ["busctl", "call", "org.bluez", "/org/bluez/hci1", "org.bluez.Adapter1", "RemoveDevice", "o",
             "/org/bluez/hci1/dev_00_AA_01_00_00_00"],
        ])


if __name__ == "__main__":
    unittest.main()


class SchedulerTests(unittest.TestCase):
    def test_reads_the_knobs_the_kernel_has_and_leaves_out_the_others(self):
        with tempfile.TemporaryDirectory() as directory:
            for knob, value in (("wakeup_granularity_ns", "1000000\n"), ("latency_ns", "6000000\n"),
                                ("base_slice_ns", "not a number\n")):
                with open(os.path.join(directory, knob), "w") as file:
                    file.write(value)
            facts = guest_common.scheduler(directory)
        self.assertEqual(facts["wakeup_granularity_ns"], 1000000)
        self.assertEqual(facts["latency_ns"], 6000000)
        self.assertNotIn("base_slice_ns", facts)
        self.assertNotIn("min_granularity_ns", facts)
        self.assertEqual(facts["kernel"], os.uname().release)

    def test_sets_the_wakeup_granularity_and_dies_without_the_knob(self):
        with tempfile.TemporaryDirectory() as directory:
            with open(os.path.join(directory, "wakeup_granularity_ns"), "w") as file:
                file.write("1000000\n")
            guest_common.set_wakeup_granularity(20000000, directory)
            self.assertEqual(guest_common.scheduler(directory)["wakeup_granularity_ns"], 20000000)
            with mock.patch("sys.stderr", io.StringIO()), self.assertRaises(SystemExit):
                guest_common.set_wakeup_granularity(1, os.path.join(directory, "missing"))


class ProcessStatTests(unittest.TestCase):
    def test_cpu_and_faults_reads_this_process(self):
        # A fresh anonymous mapping: each page faults in when first written. (A bytearray may
        # reuse memory the allocator touched before: CI's chroot counted 0 faults for one.)
        pages = mmap.mmap(-1, 64 * mmap.PAGESIZE)
        before = guest_common.cpu_and_faults(os.getpid())
        for offset in range(0, len(pages), mmap.PAGESIZE):
            pages[offset] = 1
        after = guest_common.cpu_and_faults(os.getpid())
        pages.close()
        self.assertGreaterEqual(after[1] - before[1], 16)
        self.assertGreaterEqual(after[0], before[0])
        self.assertEqual(guest_common.cpu_ticks(os.getpid()) >= after[0], True)
