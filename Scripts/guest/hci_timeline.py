"""hci_timeline — where the time from "discovered" to the first notification goes, from HCI.

Used by e2e-benchmark.py (phase 5) inside the emulated BlueZ environment, with the btsnoop file
that `btmon -w` writes there (Scripts/bluez-vm run --btmon: .bluez-vm/btmon.snoop in the share).
The file is in btsnoop's monitor format (datalink 2001: every controller, each packet tagged with
its controller index and a monitor opcode) with the kernel's wall-clock timestamps, the clock a
driver's time.time() reads inside the same guest.

phases(events, discovered, first_reading, central=0) splits one central's way from its
"discovered" line to its first reading into what the controller saw:
  to_create_connection_ms  "discovered" → LE (Extended) Create Connection on the central's
                           controller: the central process and bluetoothd asking for the link
  scan_stop_ms             "discovered" → the first time in that phase the central's
                           controller is told to stop scanning (LE Set (Extended) Scan Enable,
                           off), and
  to_create_connection_after_scan_stop_ms  that command → the LE Create Connection. For a
                           central that prints "discovered" before it stops its discovery
                           (heart-rate-central: Core Bluetooth's didDiscover, then stopScan) that
                           stop is its StopDiscovery, and the rest is its Connect (the kernel's
                           own scan for the device, then the create); for one that printed it
                           once its discovery had stopped (bleak's find_device_by_name) the stop
                           is the kernel ending its scan for the device, right before the create
  link_ms                  that command → LE (Enhanced) Connection Complete: the emulated link
                           (btvirt and the peripheral's advertising)
  att_waiting_ms           during GATT set-up (connection complete → the client characteristic
                           configuration write that enables notifications), time with an ATT
                           request of the central's outstanding: the link and the peripheral's
                           host answering
  att_host_ms              the rest of that set-up: the central's host (bluetoothd's own
                           discovery steps and the central process's calls) deciding what to ask
                           next
  notification_wait_ms     that write → the first notification on the central's controller: the
                           peripheral's next notification (at most one interval)
  delivery_ms              that notification → the central's first reading: bluetoothd and the
                           central process
and counts the central's ATT requests (att_requests) in the set-up. Nothing here is Bluetooth
hardware: btvirt forwards the packets between its virtual controllers in one process.

setup_trace(events, discovered, first_reading, central=0) lists every ATT PDU the central's
controller sent or received from the connection to the first notification, one line each (time
since the connection, direction, bearer, opcode name, its parameters in hex): what tells the
requests of one central apart from another's.
"""

import struct

EPOCH_OFFSET_US = 0x00E03AB44A676000 - 946684800 * 1_000_000  # btsnoop's 0 AD origin → Unix

OP_COMMAND, OP_EVENT, OP_ACL_TX, OP_ACL_RX = 2, 3, 4, 5
LE_CREATE_CONNECTION = (0x200D, 0x2043)  # legacy, extended
LE_SET_SCAN_ENABLE = (0x200C, 0x2042)  # legacy, extended: the first parameter is the enable
LE_META_EVENT = 0x3E
LE_CONNECTION_COMPLETE = (0x01, 0x0A)  # legacy, enhanced
ATT_CID = 4
# bluetoothd 5.66 opens EATT bearers (LE credit-based channels) next to the fixed ATT channel and
# spreads requests and notifications over them. Every dynamic channel is taken for one: no other
# L2CAP channel is open in these runs. Each ATT PDU here fits one K-frame (the SDU length, then
# the PDU).
FIRST_DYNAMIC_CID = 0x0040
ATT_REQUESTS = {0x02, 0x04, 0x06, 0x08, 0x0A, 0x0C, 0x0E, 0x10, 0x12, 0x16, 0x18, 0x20}
ATT_RESPONSES = {0x01, 0x03, 0x05, 0x07, 0x09, 0x0B, 0x0D, 0x0F, 0x11, 0x13, 0x17, 0x19, 0x21}
ATT_WRITE_REQUEST = 0x12
# A Handle Value Notification, or over EATT (bluetoothd 5.66 on both ends) a Multiple Handle
# Value Notification carrying one value.
ATT_NOTIFICATIONS = (0x1B, 0x23)
ATT_NAMES = {
    0x01: "error-rsp", 0x02: "mtu-req", 0x03: "mtu-rsp", 0x04: "find-info-req", 0x05: "find-info-rsp",
    0x06: "find-by-type-req", 0x07: "find-by-type-rsp", 0x08: "read-by-type-req", 0x09: "read-by-type-rsp",
    0x0A: "read-req", 0x0B: "read-rsp", 0x0C: "read-blob-req", 0x0D: "read-blob-rsp", 0x0E: "read-multiple-req",
    0x0F: "read-multiple-rsp", 0x10: "read-by-group-req", 0x11: "read-by-group-rsp", 0x12: "write-req",
    0x13: "write-rsp", 0x16: "prepare-write-req", 0x17: "prepare-write-rsp", 0x18: "execute-write-req",
    0x19: "execute-write-rsp", 0x1B: "notification", 0x1D: "indication", 0x1E: "confirmation",
    0x20: "read-multiple-variable-req", 0x21: "read-multiple-variable-rsp", 0x23: "multiple-notification",
    0x52: "write-cmd",
}
PHASES = ("to_create_connection_ms", "link_ms", "att_waiting_ms", "att_host_ms", "notification_wait_ms",
          "delivery_ms", "att_requests", "scan_stop_ms", "to_create_connection_after_scan_stop_ms")


def read_events(path):
    """The packets of a btsnoop monitor file as (unix seconds, index, kind, detail) tuples.

    kind: "create" (LE create connection command), "complete" (LE connection complete event,
    detail = status), "att-tx"/"att-rx" (detail = (opcode, payload bytes after the opcode,
    L2CAP channel)).
    A truncated last record (the file is still being written) is ignored.
    """
    events = []
    with open(path, "rb") as file:
        data = file.read()
    if len(data) < 16 or data[:8] != b"btsnoop\0":
        raise ValueError(f"{path}: not a btsnoop file")
    version, datalink = struct.unpack(">II", data[8:16])
    if datalink != 2001:
        raise ValueError(f"{path}: datalink {datalink}, not the monitor format (2001)")
    offset = 16
    while offset + 24 <= len(data):
        _, length, flags, _, stamp = struct.unpack(">IIIIq", data[offset:offset + 24])
        offset += 24
        packet = data[offset:offset + length]
        offset += length
        if len(packet) < length:
            break
        seconds = (stamp - EPOCH_OFFSET_US) / 1_000_000
        index, opcode = flags >> 16, flags & 0xFFFF
        event = decode(opcode, packet)
        if event is not None:
            events.append((seconds, index) + event)
    return events


def decode(opcode, packet):
    if opcode == OP_COMMAND and len(packet) >= 3:
        command = struct.unpack("<H", packet[:2])[0]
        if command in LE_CREATE_CONNECTION:
            return ("create", command)
        if command in LE_SET_SCAN_ENABLE and len(packet) >= 4 and packet[3] == 0:
            return ("scan-off", command)
    elif opcode == OP_EVENT and len(packet) >= 4:
        if packet[0] == LE_META_EVENT and packet[2] in LE_CONNECTION_COMPLETE:
            return ("complete", packet[3])
    elif opcode in (OP_ACL_TX, OP_ACL_RX) and len(packet) >= 9:
        handle_flags, _ = struct.unpack("<HH", packet[:4])
        if (handle_flags >> 12) & 0x3 == 0x1:  # a continuation fragment: no L2CAP header
            return None
        _, cid = struct.unpack("<HH", packet[4:8])
        kind = "att-tx" if opcode == OP_ACL_TX else "att-rx"
        if cid == ATT_CID:
            return (kind, (packet[8], bytes(packet[9:]), cid))
        if cid >= FIRST_DYNAMIC_CID and len(packet) >= 11:  # an EATT bearer: SDU length, then ATT
            return (kind, (packet[10], bytes(packet[11:]), cid))
    return None


def phases(events, discovered, first_reading, central=0):
    """The phases (see the module's text) of one run, or {"hci_error": why}."""
    window = [e for e in events if e[1] == central and discovered - 0.001 <= e[0] <= first_reading + 0.001]

    def first(predicate, after):
        return next((e for e in window if e[0] >= after and predicate(e)), None)

    create = first(lambda e: e[2] == "create", discovered - 0.001)
    if create is None:
        return {"hci_error": "no LE create connection after the discovered line"}
    complete = first(lambda e: e[2] == "complete" and e[3] == 0, create[0])
    if complete is None:
        return {"hci_error": "no successful LE connection complete"}
    # The notification read is the last one hci0 received before the reading, and the
    # subscription the last write enabling notifications before it: bluetoothd subscribes to
    # other characteristics of its own (Service Changed, the battery level) at other times.
    def last(predicate, before):
        return next((e for e in reversed(window) if e[0] <= before and e[0] >= complete[0] and predicate(e)), None)

    notification = last(lambda e: e[2] == "att-rx" and e[3][0] in ATT_NOTIFICATIONS, first_reading + 0.001)
    if notification is None:
        return {"hci_error": "no notification before the first reading"}
    subscribe = last(lambda e: e[2] == "att-tx" and e[3][0] == ATT_WRITE_REQUEST and e[3][1][2:4] == b"\x01\x00",
                     notification[0])
    if subscribe is None:
        return {"hci_error": "no client characteristic configuration write enabling notifications"}
    # Time with at least one request of the central's unanswered (one per bearer at a time).
    waiting, requests, bearers, since = 0.0, 0, set(), None
    for seconds, _, kind, detail in window:
        if seconds < complete[0] or seconds > subscribe[0]:
            continue
        if kind == "att-tx" and detail[0] in ATT_REQUESTS:
            requests += 1
            if not bearers:
                since = seconds
            bearers.add(detail[2])
        elif kind == "att-rx" and detail[0] in ATT_RESPONSES and detail[2] in bearers:
            bearers.discard(detail[2])
            if not bearers:
                waiting += seconds - since
    setup = subscribe[0] - complete[0]

    def ms(value):
        return round(value * 1000, 1)

    figures = {
        "to_create_connection_ms": ms(create[0] - discovered),
        "link_ms": ms(complete[0] - create[0]),
        "att_waiting_ms": ms(waiting),
        "att_host_ms": ms(setup - waiting),
        "notification_wait_ms": ms(notification[0] - subscribe[0]),
        "delivery_ms": ms(first_reading - notification[0]),
        "att_requests": requests,
    }
    scan_off = first(lambda e: e[2] == "scan-off", discovered - 0.001)
    if scan_off is not None and scan_off[0] <= create[0]:
        figures["scan_stop_ms"] = ms(scan_off[0] - discovered)
        figures["to_create_connection_after_scan_stop_ms"] = ms(create[0] - scan_off[0])
    return figures


def setup_trace(events, discovered, first_reading, central=0):
    """The ATT PDUs on the central's controller from its connection to the first reading, as text."""
    window = [e for e in events if e[1] == central and discovered - 0.001 <= e[0] <= first_reading + 0.001]
    complete = next((e for e in window if e[2] == "complete" and e[3] == 0), None)
    if complete is None:
        return []
    lines = []
    for seconds, _, kind, detail in window:
        if seconds < complete[0] or kind not in ("att-tx", "att-rx"):
            continue
        opcode, parameters, cid = detail
        name = ATT_NAMES.get(opcode, f"0x{opcode:02x}")
        lines.append(f"+{(seconds - complete[0]) * 1000:7.1f} ms {kind[4:]} cid 0x{cid:04x} {name} "
                     f"{parameters[:12].hex()}")
    return lines
