#!/usr/bin/env python3
"""bumble_early_notifier — a GATT server that notifies before it answers the write that subscribes.

Misbehaves on purpose, for BlueZKit's central (Tests/EndToEndTests/BumbleEarlyNotifierEndToEndTests.swift):
its one characteristic (5A1E0B02-…, read and notify, value 0x01) has a Client Characteristic
Configuration descriptor of its own; when a central writes it with notifications on (0100), the
server sends a Handle Value Notification of the characteristic (VALUE, default 2A) on the same ATT
bearer *before* Bumble's GATT server sends the Write Response (the descriptor's write callback runs
before the response goes out, and sends the notification PDU itself). A peripheral is allowed to
notify once the CCC is written; the central's stack must not lose the value for arriving ahead of
the response. Writes of 0000 are answered as usual. Runs until the link ends. Run with the Bumble
venv's python3 (BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_early_notifier.py [--value HEX] [--name NAME] [--transport T] [--timeout S]

Lines on standard output (JSON), besides those of bumble_faulty_server:
  {"event":"cccWritten","value":HEX}  for each CCC write, as it arrives
  {"event":"notifiedEarly","value":HEX}  the notification, sent before that write's response
  {"event":"done"}
"""

import argparse

from bumble import att
from bumble.gatt import (GATT_CLIENT_CHARACTERISTIC_CONFIGURATION_DESCRIPTOR, Characteristic,
                         CharacteristicValue, Descriptor, Service)

import bumble_faulty_server as faulty
import bumble_peer
from bumble_peer import emit


def main():
    parser = argparse.ArgumentParser(description="A GATT server that notifies before its CCC write response.")
    parser.add_argument("--value", type=bytes.fromhex, default=bytes([0x2A]))
    parser.add_argument("--name", default="BZK-EARLY")
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:0B:02")
    args = parser.parse_args()
    ccc_value = {}
    server = {}

    def read_ccc(connection):
        return ccc_value.get(connection, bytes(2))

    def write_ccc(connection, value):
        value = bytes(value)
        emit("cccWritten", value=value.hex())
        ccc_value[connection] = value
        if len(value) == 2 and value[0] & 0x01:
            # Straight onto the link, ahead of the Write Response that Bumble sends once this returns.
            notification = att.ATT_Handle_Value_Notification(attribute_handle=characteristic.handle,
                                                             attribute_value=args.value)
            server["gatt"].send_gatt_pdu(connection, bytes(notification))
            emit("notifiedEarly", value=args.value.hex())

    ccc = Descriptor(GATT_CLIENT_CHARACTERISTIC_CONFIGURATION_DESCRIPTOR,
                     Descriptor.READABLE | Descriptor.WRITEABLE,
                     CharacteristicValue(read=read_ccc, write=write_ccc))
    characteristic = Characteristic(faulty.characteristic_uuid(0),
                                    Characteristic.Properties.READ | Characteristic.Properties.NOTIFY,
                                    Characteristic.READABLE, bytes([1]), descriptors=[ccc])

    def prepare(device, _connections):
        server["gatt"] = device.gatt_server

    faulty.serve(args, [Service(faulty.SERVICE_UUID, [characteristic])], prepare)


if __name__ == "__main__":
    main()
