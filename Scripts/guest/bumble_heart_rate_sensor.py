#!/usr/bin/env python3
"""bumble_heart_rate_sensor — a heart-rate sensor made of Google Bumble's own HeartRateService.

A peripheral nobody here wrote, for BlueZKit's central role (Tests/EndToEndTests/
BumbleEndToEndTests.swift): Bumble's GATT server, ATT and L2CAP answer the central, on a Bumble
controller linked to the one the guest's bluetoothd manages (see bumble_peer.py, bumble-link.py).
Run with the Bumble venv's python3 (BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_heart_rate_sensor.py [--name NAME] [--count N] [--interval-ms MS] [--transport T] [--timeout S]

Advertises NAME and the Heart Rate service (0x180D), connectable. Body Sensor Location is
Wrist (2). Once a central subscribes to Heart Rate Measurement, sends N measurements, one per
interval, each printed as it is handed to Bumble; then waits until the central unsubscribes
(writes the CCC back to 0) or disconnects, and exits.
Lines on standard output (JSON):
  {"event":"advertising"}
  {"event":"connected","peer":ADDRESS}
  {"event":"subscribed","notify":true}
  {"event":"notified","bpm":B,"energyExpended":E or null,"rrIntervals":[seconds...]}  ×N
  {"event":"subscribed","notify":false} or {"event":"disconnected","reason":CODE}
  {"event":"done"}
The measurements: 70, 300 (a 16-bit rate), 72, 73, …; an even one carries energy expended
(1000 + its index), every one the RR interval 1.0 s (1024/1024).
"""

import argparse
import asyncio

from bumble.core import AdvertisingData, UUID
from bumble.profiles.heart_rate_service import HeartRateService

import bumble_peer
from bumble_peer import emit

Measurement = HeartRateService.HeartRateMeasurement


def measurement(index):
    return Measurement(
        heart_rate=300 if index == 1 else 70 + index,
        sensor_contact_detected=True,
        energy_expended=1000 + index if index % 2 == 0 else None,
        rr_intervals=[1.0],
    )


def main():
    parser = argparse.ArgumentParser(description="Bumble's HeartRateService as a peripheral.")
    parser.add_argument("--name", default="Bumble HRM")
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--interval-ms", type=int, default=200)
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:00:01")
    args = parser.parse_args()

    service = HeartRateService(
        read_heart_rate_measurement=lambda _connection: measurement(0),
        body_sensor_location=HeartRateService.BodySensorLocation.WRIST,
    )
    subscribed = asyncio.Event()
    finished = asyncio.Event()

    def prepare(device):
        device.add_service(service)

        def on_subscription(_bearer, notify, indicate):
            emit("subscribed", notify=notify, indicate=indicate)
            if notify:
                subscribed.set()
            elif subscribed.is_set():
                finished.set()

        service.heart_rate_measurement_characteristic.on("subscription", on_subscription)

        def on_connection(connection):
            emit("connected", peer=str(connection.peer_address))
            connection.on("disconnection", lambda reason: (emit("disconnected", reason=reason), finished.set()))

        device.on("connection", on_connection)

    async def run(device):
        device.advertising_data = bytes(AdvertisingData([
            (AdvertisingData.FLAGS, bytes([AdvertisingData.LE_GENERAL_DISCOVERABLE_MODE_FLAG
                                           | AdvertisingData.BR_EDR_NOT_SUPPORTED_FLAG])),
            (AdvertisingData.INCOMPLETE_LIST_OF_16_BIT_SERVICE_CLASS_UUIDS, bytes(UUID.from_16_bits(0x180D))),
            (AdvertisingData.COMPLETE_LOCAL_NAME, args.name.encode()),
        ]))
        await device.start_advertising(auto_restart=False)
        emit("advertising")
        await subscribed.wait()
        for index in range(args.count):
            value = measurement(index)
            await device.notify_subscribers(service.heart_rate_measurement_characteristic, value)
            emit("notified", bpm=value.heart_rate, energyExpended=value.energy_expended,
                 rrIntervals=list(value.rr_intervals))
            await asyncio.sleep(args.interval_ms / 1000)
        await finished.wait()

    bumble_peer.run(args, prepare, run)


if __name__ == "__main__":
    main()
