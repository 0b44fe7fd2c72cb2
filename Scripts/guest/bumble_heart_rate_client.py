#!/usr/bin/env python3
"""bumble_heart_rate_client — a heart-rate monitor made of Google Bumble's own heart-rate client profile.

A central nobody here wrote, for BlueZKit's peripheral role (Tests/EndToEndTests/
BumbleEndToEndTests.swift): Bumble's scanner, GATT client (HeartRateServiceProxy), ATT and L2CAP
talk to the peripheral through the guest's bluetoothd (see bumble_peer.py, bumble-link.py).
Run with the Bumble venv's python3 (BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_heart_rate_client.py [--count N] [--transport T] [--timeout S]

Scans for an advertisement that lists the Heart Rate service (0x180D), connects, discovers the Heart Rate
service with HeartRateServiceProxy, reads Body Sensor Location, subscribes to Heart Rate
Measurement until N measurements came, writes "reset energy expended" (1) to the control point
when there is one (then reads the sensor location again, so that the unanswered Write Command
has reached the peripheral), and disconnects. Lines on standard output (JSON):
  {"event":"scanning"}
  {"event":"found","address":ADDRESS}
  {"event":"connected"}
  {"event":"sensorLocation","value":V}
  {"event":"heartRate","bpm":B,"energyExpended":E or null,"rrIntervals":[seconds...],"contact":C}  ×N
  {"event":"controlPoint","written":1}
  {"event":"disconnected"}
  {"event":"done"}
It matches the service, not a name: bluetoothd puts a peripheral's name in its scan response,
and Bumble 0.0.236's LocalLink carries none (its controller reports the advertising data again as
the scan response), so a name would never be seen.
Any failure, Bumble's own included (a malformed measurement, an ATT error), prints
{"event":"error","message":...} and exits 1.
"""

import argparse
import asyncio

from bumble.core import UUID
from bumble.device import Peer
from bumble.profiles.heart_rate_service import HeartRateServiceProxy

import bumble_peer
from bumble_peer import emit


def main():
    parser = argparse.ArgumentParser(description="Bumble's heart-rate client profile as a central.")
    parser.add_argument("--count", type=int, default=3)
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:00:02")
    args = parser.parse_args()
    args.name = "Bumble HR client"
    heart_rate_service = UUID.from_16_bits(0x180D)
    async def run(device):
        address = await bumble_peer.scan_for_service(device, heart_rate_service)
        emit("found", address=str(address))
        connection = await device.connect(address)
        emit("connected")
        peer = Peer(connection)
        heart_rate = await peer.discover_service_and_create_proxy(HeartRateServiceProxy)
        if heart_rate is None:
            raise RuntimeError("the peer has no Heart Rate service")
        if heart_rate.body_sensor_location is not None:
            emit("sensorLocation", value=int(await heart_rate.body_sensor_location.read_value()))
        readings = asyncio.Queue()
        await heart_rate.heart_rate_measurement.subscribe(readings.put_nowait)
        for _ in range(args.count):
            reading = await readings.get()
            emit("heartRate", bpm=reading.heart_rate, energyExpended=reading.energy_expended,
                 rrIntervals=list(reading.rr_intervals or []), contact=reading.sensor_contact_detected)
        await heart_rate.heart_rate_measurement.unsubscribe()
        if heart_rate.heart_rate_control_point is not None:
            await heart_rate.reset_energy_expended()
            emit("controlPoint", written=1)
            # Bumble's profile sends a Write Command, which nothing answers: a link ended at once
            # can lose it (a loaded guest did: bluetoothd never logged it). A read after it is
            # answered only once the peripheral has taken the command, as ATT serves in order.
            if heart_rate.body_sensor_location is not None:
                await heart_rate.body_sensor_location.read_value()
        await connection.disconnect()
        emit("disconnected")

    bumble_peer.run(args, lambda _device: None, run)


if __name__ == "__main__":
    main()
