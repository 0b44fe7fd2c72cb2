#!/usr/bin/env python3
"""bumble_ccc_refuser — a GATT server that refuses every subscription with an ATT error.

Misbehaves on purpose, for BlueZKit's central (Tests/EndToEndTests/FaultyPeerEndToEndTests.swift):
its one characteristic (5A1E0B02-…, read and notify, value 0x01) has a Client Characteristic
Configuration descriptor whose every write is answered with an ATT Error Response carrying CODE
(default 0x03, Write Not Permitted; 0x80 is an application error). Reads of the CCC answer 0000.
Runs until the link ends. Run with the Bumble venv's python3 (BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_ccc_refuser.py [--code CODE] [--name NAME] [--transport T] [--timeout S]

Lines on standard output (JSON), besides those of bumble_faulty_server:
  {"event":"refused","value":HEX,"code":CODE}  for each CCC write
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
    parser = argparse.ArgumentParser(description="A GATT server that refuses every CCC write.")
    parser.add_argument("--code", type=lambda text: int(text, 0), default=0x03)
    parser.add_argument("--name", default="BZK-CCC")
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:0B:01")
    args = parser.parse_args()

    def refuse(_connection, value):
        emit("refused", value=bytes(value).hex(), code=args.code)
        raise att.ATT_Error(args.code)

    ccc = Descriptor(GATT_CLIENT_CHARACTERISTIC_CONFIGURATION_DESCRIPTOR,
                     Descriptor.READABLE | Descriptor.WRITEABLE,
                     CharacteristicValue(read=lambda _connection: bytes(2), write=refuse))
    characteristic = Characteristic(faulty.characteristic_uuid(0),
                                    Characteristic.Properties.READ | Characteristic.Properties.NOTIFY,
                                    Characteristic.READABLE, bytes([1]), descriptors=[ccc])
    faulty.serve(args, [Service(faulty.SERVICE_UUID, [characteristic])])


if __name__ == "__main__":
    main()
