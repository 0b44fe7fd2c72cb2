"""Tests of max-rate-benchmark.py's verdicts and central_runs.py's per-thread figures
(python3 -m unittest discover -s Scripts/guest)."""

import importlib.util
import os
import unittest

import central_runs

_spec = importlib.util.spec_from_file_location(
    "max_rate_benchmark", os.path.join(os.path.dirname(os.path.abspath(__file__)), "max-rate-benchmark.py"))
max_rate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(max_rate)


def run(side, interval, rate, notified, count=601, error=None):
    figures = {"side": side, "interval_ms": interval, "count": count, "notifications_per_s": rate,
               "peripheral_notified_lines": notified}
    if error:
        figures["error"] = error
    return figures


class KeptUpTests(unittest.TestCase):
    def test_a_central_that_received_what_was_notified_in_its_window_kept_up(self):
        self.assertTrue(max_rate.kept_up(run("c", 5, 199.0, 600), 0.98))
        self.assertTrue(max_rate.kept_up(run("c", 5, 199.0, 612), 0.98))

    def test_a_central_the_peripheral_ran_ahead_of_fell_behind(self):
        self.assertFalse(max_rate.kept_up(run("c", 2, 240.0, 700), 0.98))

    def test_a_failed_run_or_one_without_the_peripherals_count_never_kept_up(self):
        self.assertFalse(max_rate.kept_up(run("c", 5, 199.0, 600, error="no readings"), 0.98))
        self.assertFalse(max_rate.kept_up(run("c", 5, 199.0, 0), 0.98))
        self.assertFalse(max_rate.kept_up(run("c", 5, 199.0, None), 0.98))


class SummarizeTests(unittest.TestCase):
    def test_the_maximum_is_the_highest_rate_of_a_run_that_kept_up_not_the_highest_rate(self):
        runs = [run("bluezkit", 6, 166.0, 600), run("bluezkit", 4, 248.0, 605), run("bluezkit", 3, 290.0, 720),
                run("bluezkit", 2, 300.0, 900)]
        figures = max_rate.summarize(runs, ["bluezkit"], 0.98)["bluezkit"]
        self.assertEqual(figures["max_notifications_per_s"], 248.0)
        self.assertEqual(figures["at_interval_ms"], 4)
        self.assertEqual(figures["best_notifications_per_s"], 300.0)
        self.assertEqual((figures["runs_kept_up"], figures["runs"]), (2, 4))

    def test_a_side_that_never_kept_up_has_no_maximum_and_failed_runs_are_counted_as_runs(self):
        runs = [run("bleak", 6, 120.0, 800), run("bleak", 5, 0.0, 0, error="exit 1"), run("c", 6, 166.0, 600)]
        summary = max_rate.summarize(runs, ["bleak", "c"], 0.98)
        self.assertIsNone(summary["bleak"]["max_notifications_per_s"])
        self.assertEqual(summary["bleak"]["best_notifications_per_s"], 120.0)
        self.assertEqual(summary["bleak"]["runs"], 2)
        self.assertEqual(summary["c"]["max_notifications_per_s"], 166.0)


class ThreadFiguresTests(unittest.TestCase):
    def test_per_name_sums_with_the_involuntary_switches_and_the_busiest_thread(self):
        start = {"1": ("BlueZKit bus", 0, 10, 1), "2": ("BlueZKit bus", 0, 0, 0), "3": ("main", 0, 0, 0)}
        end = {"1": ("BlueZKit bus", 500_000_000, 1010, 801), "2": ("BlueZKit bus", 20_000_000, 50, 0),
               "3": ("main", 0, 0, 0), "4": ("late", 1, 1, 1)}
        figures = central_runs.thread_figures(start, end, 1000)
        bus = figures["BlueZKit bus"]
        self.assertEqual(bus["threads"], 2)
        self.assertAlmostEqual(bus["ms"], 0.52)
        self.assertAlmostEqual(bus["switches"], 1.85)
        self.assertAlmostEqual(bus["involuntary_switches"], 0.8)
        self.assertAlmostEqual(bus["busiest_ms"], 0.5)
        self.assertAlmostEqual(bus["busiest_switches"], 1.8)
        self.assertAlmostEqual(bus["busiest_involuntary_switches"], 0.8)
        self.assertNotIn("late", figures)


if __name__ == "__main__":
    unittest.main()
