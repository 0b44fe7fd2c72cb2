#!/usr/bin/env python3
"""bumble_pairing_peripheral — a GATT server whose one characteristic needs an authenticated link,
with Bumble's SMP as the judge of how the central paired.

For BlueZKit's pairing agent (Tests/EndToEndTests/BumblePairingEndToEndTests.swift): its service
5A1E0E01-…-000000000035 has one readable characteristic, 5A1E0E02-…-000000000035, whose value
0x4D is given only on a link encrypted with the keys of an authenticated pairing (passkey entry
or numeric comparison, not just works). Any other read is answered Insufficient Authentication
(0x05), which makes the central's host pair (again). Bumble's own READ_REQUIRES_AUTHENTICATION
will not do: Bumble takes every encrypted LE link for authenticated, so this peer reads the
authentication from the keys its SMP made.

Bumble pairs as the responder with LE Secure Connections, MITM wanted, bonding, and the IO
capability of --io: display-only (the central types the passkey Bumble shows), display-yes-no
(numeric comparison when the central can confirm), keyboard-only or no-input-no-output.
--compare says what Bumble answers to a numeric comparison. Bumble keeps no keys across runs.
Run with the Bumble venv's python3 (BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_pairing_peripheral.py [--io IO] [--compare accept|reject] [--passkey N] [--name NAME]
                               [--transport T] [--timeout S]

Lines on standard output (JSON), besides those of bumble_faulty_server:
  {"event":"passkey","number":N}     Bumble shows N for the central's user to type (display_number)
  {"event":"compare","number":N}     Bumble shows N for a numeric comparison (compare_numbers)
  {"event":"passkeyAsked"}           Bumble is asked to type a passkey, which it refuses
  {"event":"paired","authenticated":B,"sc":B}  Bumble's SMP completed; B: the keys are authenticated
  {"event":"pairingFailed","reason":CODE}      the pairing failed (SMP reason, either side's)
  {"event":"read","authenticated":B}           a read of the characteristic; answered 0x4D when B
  {"event":"done"}
"""

import argparse

from bumble.att import ATT_Error, ErrorCode
from bumble.core import UUID
from bumble.gatt import Characteristic, CharacteristicValue, Service
from bumble.pairing import PairingConfig

import bumble_faulty_server as faulty
import bumble_peer
from bumble_pairing import IO_CAPABILITIES, Judge
from bumble_peer import emit

SERVICE_UUID = UUID("5A1E0E01-B1E2-4C00-9E00-000000000035")
SECRET_UUID = UUID("5A1E0E02-B1E2-4C00-9E00-000000000035")


def main():
    parser = argparse.ArgumentParser(description="A GATT server that needs an authenticated pairing.")
    parser.add_argument("--io", choices=sorted(IO_CAPABILITIES), default="display-only")
    parser.add_argument("--compare", choices=["accept", "reject"], default="accept")
    parser.add_argument("--passkey", type=int, default=None, help="the passkey to show (default: random)")
    parser.add_argument("--name", default="BZK-PAIR")
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:0E:01")
    args = parser.parse_args()
    authenticated = set()  # the connections whose current keys came from an authenticated pairing
    link = {}

    def read(connection):
        answered = connection in authenticated and connection.is_encrypted
        emit("read", authenticated=answered)
        if not answered:
            raise ATT_Error(ErrorCode.INSUFFICIENT_AUTHENTICATION)
        return bytes([0x4D])

    secret = Characteristic(SECRET_UUID, Characteristic.Properties.READ, Characteristic.READABLE,
                            CharacteristicValue(read=read))

    def on_connection(connection):
        def on_pairing(keys):
            key = keys.ltk or keys.ltk_peripheral
            if key is not None and key.authenticated:
                authenticated.add(connection)
            else:
                authenticated.discard(connection)
            emit("paired", authenticated=bool(key and key.authenticated), sc=keys.ltk is not None)

        def on_pairing_failure(reason):
            authenticated.discard(connection)
            emit("pairingFailed", reason=int(reason))

        connection.on("pairing", on_pairing)
        connection.on("pairing_failure", on_pairing_failure)

    def prepare(device):
        judge = Judge(IO_CAPABILITIES[args.io], args.compare == "accept", args.passkey)
        device.pairing_config_factory = lambda _connection: PairingConfig(
            sc=True, mitm=True, bonding=True, delegate=judge)
        device.add_service(Service(SERVICE_UUID, [secret]))
        device.on("connection", on_connection)
        link["ended"], _ = faulty.watch_link(device)

    async def run(device):
        await faulty.advertise(device, args.name, SERVICE_UUID)
        await link["ended"].wait()

    bumble_peer.run(args, prepare, run)


if __name__ == "__main__":
    main()
