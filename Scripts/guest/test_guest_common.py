"""Tests of guest_common.py's pure parts (python3 -m unittest discover -s Scripts/guest)."""

import io
import os
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


if __name__ == "__main__":
    unittest.main()
