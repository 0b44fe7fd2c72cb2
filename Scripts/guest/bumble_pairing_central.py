#!/usr/bin/env python3
"""bumble_pairing_central — a Bumble central that pairs with a peripheral to read a value that needs
an encrypted link, with Bumble's SMP as the judge of how the peripheral's side paired.

For BlueZKit's peripheral role (Tests/EndToEndTests/BumblePeripheralPairingEndToEndTests.swift):
it finds the peripheral advertising --service, reads --characteristic once unpaired (the answer
is printed, Insufficient Encryption expected), pairs as the initiator (LE Secure Connections,
bonding, MITM unless --no-mitm, the IO capability of --io), and reads the characteristic again,
then disconnects. The peripheral's host chooses nothing here: its kernel's SMP picks the method
from both IO capabilities, and its bluetoothd asks its default agent.

--io: display-only (the peripheral's user types the passkey Bumble shows), display-yes-no
(numeric comparison when the peripheral can confirm), keyboard-only (Bumble types the passkey
the peripheral shows: the test writes it to --passkey-file, which Bumble waits for) or
no-input-no-output. --compare says what Bumble answers to a numeric comparison. Bumble keeps
no keys across runs. Run with the Bumble venv's python3 (BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_pairing_central.py --service UUID --characteristic UUID [--io IO] [--no-mitm]
      [--compare accept|reject] [--passkey N] [--passkey-file PATH] [--address A]
      [--transport T] [--timeout S]

Lines on standard output (JSON):
  {"event":"scanning"}  {"event":"connected"}
  {"event":"readBeforePairing","error":CODE or null,"value":HEX or null}
  {"event":"passkey","number":N}     Bumble shows N for the peripheral's user to type
  {"event":"passkeyAsked"}           Bumble is asked to type the passkey (waits for --passkey-file)
  {"event":"passkeyEntered","number":N}
  {"event":"compare","number":N}     Bumble shows N for a numeric comparison
  {"event":"paired","authenticated":B,"sc":B}  Bumble's SMP completed; B: the keys are authenticated
  {"event":"pairingFailed","reason":CODE}      the pairing failed (SMP reason, either side's)
  {"event":"read","error":CODE or null,"value":HEX or null}  the read after the pairing
  {"event":"disconnected"}  {"event":"done"}
A read on a link that is gone prints "error":"disconnected". A failure of the run prints
{"event":"error","message":...} and exits 1.
"""

import argparse
import asyncio

from bumble.core import UUID, ProtocolError
from bumble.device import Peer
from bumble.pairing import PairingConfig

import bumble_peer
from bumble_pairing import IO_CAPABILITIES, Judge
from bumble_peer import emit

async def read(characteristic, connection):
    """Reads once: (ATT error code or "disconnected" or None, value as hex or None)."""
    if connection.handle not in connection.device.connections:
        return "disconnected", None
    try:
        value = await characteristic.read_value()
    except ProtocolError as error:
        return int(error.error_code), None
    except Exception:  # noqa: BLE001 (the link went away under the request)
        if connection.handle not in connection.device.connections:
            return "disconnected", None
        raise
    return None, bytes(value).hex()


def main():
    parser = argparse.ArgumentParser(description="Pairs with a peripheral to read what needs encryption.")
    parser.add_argument("--service", required=True)
    parser.add_argument("--characteristic", required=True)
    parser.add_argument("--io", choices=sorted(IO_CAPABILITIES), default="display-yes-no")
    parser.add_argument("--no-mitm", action="store_true", help="ask for no MITM protection")
    parser.add_argument("--compare", choices=["accept", "reject"], default="accept")
    parser.add_argument("--passkey", type=int, default=None, help="the passkey to show (default: random)")
    parser.add_argument("--passkey-file", default=None, help="where the test writes the passkey Bumble types")
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:0E:21")
    args = parser.parse_args()
    args.name = "Bumble pairing central"

    def prepare(device):
        judge = Judge(IO_CAPABILITIES[args.io], args.compare == "accept", args.passkey, args.passkey_file)
        device.pairing_config_factory = lambda _connection: PairingConfig(
            sc=True, mitm=not args.no_mitm, bonding=True, delegate=judge)

    async def run(device):
        address = await bumble_peer.scan_for_service(device, UUID(args.service))
        connection = await device.connect(address)
        emit("connected")
        ended = asyncio.Event()
        connection.on("disconnection", lambda _reason: ended.set())

        def on_pairing(keys):
            key = keys.ltk or keys.ltk_central
            emit("paired", authenticated=bool(key and key.authenticated), sc=keys.ltk is not None)

        connection.on("pairing", on_pairing)
        connection.on("pairing_failure", lambda reason: emit("pairingFailed", reason=int(reason)))

        peer = Peer(connection)
        services = await peer.discover_service(UUID(args.service))
        if not services:
            raise RuntimeError(f"the peer has no service {args.service}")
        found = [c for c in await services[0].discover_characteristics() if c.uuid == UUID(args.characteristic)]
        if not found:
            raise RuntimeError(f"the service has no characteristic {args.characteristic}")
        error, value = await read(found[0], connection)
        emit("readBeforePairing", error=error, value=value)
        try:
            await connection.pair()
        except ProtocolError:
            pass  # reported by the pairing_failure event
        error, value = await read(found[0], connection)
        emit("read", error=error, value=value)
        if not ended.is_set():
            await connection.disconnect()
        emit("disconnected")

    bumble_peer.run(args, prepare, run)


if __name__ == "__main__":
    main()
