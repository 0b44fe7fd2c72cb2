"""Tests of hci_timeline on a btsnoop monitor file written here, packet by packet.

Run by Scripts/test: python3 -m unittest discover -s Scripts/guest -p 'test_*.py'
"""

import os
import struct
import tempfile
import unittest

import hci_timeline

BASE = 1_700_000_000.0  # a Unix time; the file stores it from btsnoop's 0 AD origin


def record(seconds, index, opcode, payload):
    stamp = round(seconds * 1_000_000) + hci_timeline.EPOCH_OFFSET_US
    return struct.pack(">IIIIq", len(payload), len(payload), (index << 16) | opcode, 0, stamp) + payload


def command(opcode):
    return struct.pack("<HB", opcode, 0)


def connection_complete(status=0):
    return bytes([hci_timeline.LE_META_EVENT, 19, 0x01, status]) + bytes(16)


def att(pdu, handle=0x0040, continuation=False, cid=hci_timeline.ATT_CID):
    flags = 0x1 if continuation else 0x2
    if cid != hci_timeline.ATT_CID:  # an EATT K-frame: the SDU length first
        pdu = struct.pack("<H", len(pdu)) + pdu
    l2cap = struct.pack("<HH", len(pdu), cid) + pdu
    return struct.pack("<HH", handle | (flags << 12), len(l2cap)) + l2cap


TX, RX = hci_timeline.OP_ACL_TX, hci_timeline.OP_ACL_RX


class PhasesTests(unittest.TestCase):
    def write(self, records, truncate=0):
        handle, path = tempfile.mkstemp(suffix=".snoop")
        data = b"btsnoop\0" + struct.pack(">II", 1, 2001) + b"".join(records)
        with os.fdopen(handle, "wb") as file:
            file.write(data[:len(data) - truncate] if truncate else data)
        self.addCleanup(os.remove, path)
        return path

    def run_records(self):
        t = BASE
        return [
            record(t + 0.005, 0, hci_timeline.OP_COMMAND, command(0x200C)),  # scan enable: not a connect
            record(t + 0.010, 0, hci_timeline.OP_COMMAND, command(0x2043)),  # extended create connection
            record(t + 0.020, 1, hci_timeline.OP_EVENT, connection_complete()),  # the peripheral's end
            record(t + 0.060, 0, hci_timeline.OP_EVENT, connection_complete()),
            record(t + 0.070, 0, TX, att(bytes([0x02, 0x00, 0x02]))),  # exchange MTU request
            record(t + 0.075, 0, TX, att(b"\x00\x00", continuation=True)),  # no ATT header: skipped
            record(t + 0.080, 0, RX, att(bytes([0x03, 0x00, 0x02]))),
            record(t + 0.085, 0, RX, att(bytes([0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28]))),  # the peer asks
            record(t + 0.090, 0, TX, att(bytes([0x11, 0x06]))),  # and is answered
            record(t + 0.100, 0, TX, att(bytes([0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28]))),
            record(t + 0.130, 0, RX, att(bytes([0x11, 0x06]))),
            record(t + 0.150, 0, TX, att(bytes([0x12, 0x10, 0x00, 0x02, 0x00]))),  # CCC: indications
            record(t + 0.160, 0, RX, att(bytes([0x13]))),
            record(t + 0.200, 0, TX, att(bytes([0x12, 0x0E, 0x00, 0x01, 0x00]))),  # CCC: notifications
            record(t + 0.210, 0, RX, att(bytes([0x13]))),
            record(t + 0.230, 1, TX, att(bytes([0x1B, 0x0D, 0x00, 0x16, 0x48]))),  # sent by the peripheral
            record(t + 0.240, 0, RX, att(bytes([0x1B, 0x0D, 0x00, 0x16, 0x48]), cid=0x41)),  # over EATT
        ]

    def test_each_phase_comes_from_the_central_controllers_packets(self):
        events = hci_timeline.read_events(self.write(self.run_records()))
        figures = hci_timeline.phases(events, BASE, BASE + 0.250)
        self.assertEqual(figures, {
            "to_create_connection_ms": 10.0,
            "link_ms": 50.0,
            # MTU 10 ms, read by group type 30 ms, the CCC write for indications 10 ms.
            "att_waiting_ms": 50.0,
            "att_host_ms": 90.0,
            "notification_wait_ms": 40.0,
            "delivery_ms": 10.0,
            "att_requests": 4,
        })

    def test_a_scan_stopped_after_the_discovered_line_splits_the_asking_phase(self):
        t = BASE
        records = self.run_records()
        # Before the window (not counted), then in it: the scan switched off at +4 ms (legacy,
        # then extended: the first one counts), on again elsewhere (not a stop).
        records[0:0] = [record(t - 0.010, 0, hci_timeline.OP_COMMAND, struct.pack("<HBBB", 0x200C, 2, 0, 0))]
        records.insert(2, record(t + 0.004, 0, hci_timeline.OP_COMMAND, struct.pack("<HBBB", 0x2042, 6, 0, 0)))
        records.insert(3, record(t + 0.006, 0, hci_timeline.OP_COMMAND, struct.pack("<HBBB", 0x200C, 2, 0, 0)))
        records.insert(4, record(t + 0.007, 1, hci_timeline.OP_COMMAND, struct.pack("<HBBB", 0x200C, 2, 1, 0)))
        figures = hci_timeline.phases(hci_timeline.read_events(self.write(records)), BASE, BASE + 0.250)
        self.assertEqual(figures["to_create_connection_ms"], 10.0)
        self.assertEqual(figures["scan_stop_ms"], 4.0)
        self.assertEqual(figures["to_create_connection_after_scan_stop_ms"], 6.0)

    def test_a_scan_switched_on_is_not_a_stop(self):
        records = self.run_records()
        records.insert(1, record(BASE + 0.007, 0, hci_timeline.OP_COMMAND, struct.pack("<HBBB", 0x200C, 2, 1, 0)))
        figures = hci_timeline.phases(hci_timeline.read_events(self.write(records)), BASE, BASE + 0.250)
        self.assertNotIn("scan_stop_ms", figures)

    def test_requests_in_flight_on_two_bearers_at_once_are_counted_once(self):
        records = self.run_records()
        # A read on an EATT bearer from 0.095 to 0.140, overlapping the read by group type
        # (0.100 - 0.130): waiting 0.095 - 0.140 instead of 0.100 - 0.130.
        records[9:9] = [record(BASE + 0.095, 0, TX, att(bytes([0x0A, 0x03, 0x00]), cid=0x40))]
        records[12:12] = [record(BASE + 0.140, 0, RX, att(bytes([0x0B, 0x01]), cid=0x40))]
        figures = hci_timeline.phases(hci_timeline.read_events(self.write(records)), BASE, BASE + 0.250)
        self.assertEqual((figures["att_waiting_ms"], figures["att_requests"]), (65.0, 5))

    def test_an_earlier_subscription_of_bluetoothds_own_and_a_multiple_notification(self):
        records = self.run_records()
        # bluetoothd enables Service Changed indications... as notifications, earlier (0.120):
        # not the subscription. The value comes as a Multiple Handle Value Notification (EATT).
        records[11:11] = [record(BASE + 0.120, 0, TX, att(bytes([0x12, 0x03, 0x00, 0x01, 0x00]))),
                          record(BASE + 0.125, 0, RX, att(bytes([0x13])))]
        records[-1] = record(BASE + 0.240, 0, RX, att(bytes([0x23, 0x0D, 0x00, 0x02, 0x00, 0x16, 0x48]), cid=0x41))
        figures = hci_timeline.phases(hci_timeline.read_events(self.write(records)), BASE, BASE + 0.250)
        self.assertEqual(
            (figures["att_waiting_ms"], figures["att_host_ms"], figures["notification_wait_ms"], figures["att_requests"]),
            (55.0, 85.0, 40.0, 5))

    def test_the_trace_lists_the_central_controllers_att_pdus_from_the_connection(self):
        events = hci_timeline.read_events(self.write(self.run_records()))
        trace = hci_timeline.setup_trace(events, BASE, BASE + 0.250)
        self.assertEqual(trace[0], "+   10.0 ms tx cid 0x0004 mtu-req 0002")
        self.assertEqual(trace[3], "+   30.0 ms tx cid 0x0004 read-by-group-rsp 06")
        self.assertEqual(trace[-1], "+  180.0 ms rx cid 0x0041 notification 0d001648")
        # The peripheral's controller (index 1) and the packets before the link are not in it.
        self.assertEqual(len(trace), 11)

    def test_a_record_cut_short_at_the_end_is_ignored(self):
        events = hci_timeline.read_events(self.write(self.run_records(), truncate=3))
        self.assertEqual(events[-1][0], BASE + 0.230)  # the last whole record
        self.assertIn("hci_error", hci_timeline.phases(events, BASE, BASE + 0.250))

    def test_a_failed_connection_is_not_the_link(self):
        records = self.run_records()
        records[3] = record(BASE + 0.060, 0, hci_timeline.OP_EVENT, connection_complete(status=0x3E))
        figures = hci_timeline.phases(hci_timeline.read_events(self.write(records)), BASE, BASE + 0.250)
        self.assertEqual(figures, {"hci_error": "no successful LE connection complete"})

    def test_a_file_that_is_not_a_monitor_trace_is_refused(self):
        handle, path = tempfile.mkstemp()
        with os.fdopen(handle, "wb") as file:
            file.write(b"btsnoop\0" + struct.pack(">II", 1, 1002))
        self.addCleanup(os.remove, path)
        with self.assertRaises(ValueError):
            hci_timeline.read_events(path)


if __name__ == "__main__":
    unittest.main()
