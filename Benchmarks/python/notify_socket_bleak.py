"""bleak's AcquireNotify reader under callgrind (Scripts/benchmark, fd_notify, for information).

    python notify_socket_bleak.py NOTIFY_SOCKET_BENCHMARK N [BATCH]

What NotifySocketBenchmark's receive does, with bleak: starts `NOTIFY_SOCKET_BENCHMARK serve`
(BlueZKitTesting's simulated bluetoothd and a heart-rate sensor on a private bus, in a
child process that callgrind --trace-children=no does not count), points bleak's system
bus at it (DBUS_SYSTEM_BUS_ADDRESS), finds the sensor by name, connects, subscribes to
0x2A37 with bluez={"use_start_notify": False} (AcquireNotify: bleak reads the socket with
loop.add_reader), has the child check NotifyAcquired, then receives N notifications in
batches of BATCH (default 200), the next batch only once the callback counted the previous
one. The callback reads the rate byte as the Swift delegate does. Prints
"received N checksum C"; exits 1 on any failure.
"""

import asyncio
import os
import subprocess
import sys

MEASUREMENT = "00002a37-0000-1000-8000-00805f9b34fb"
NAME = "Notify Bench"


def fail(text):
    sys.stderr.write(f"notify_socket_bleak: {text}\n")
    sys.exit(1)


def main():
    if len(sys.argv) not in (3, 4):
        fail("usage: notify_socket_bleak.py NOTIFY_SOCKET_BENCHMARK N [BATCH]")
    count = int(sys.argv[2])
    batch = int(sys.argv[3]) if len(sys.argv) == 4 else 200
    child = subprocess.Popen([sys.argv[1], "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    first = child.stdout.readline().decode().strip()
    if not first.startswith("address "):
        fail("the simulator did not start")
    os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = first[len("address "):]

    def command(text):
        child.stdin.write(f"{text}\n".encode())
        child.stdin.flush()
        answer = child.stdout.readline().decode().strip()
        if answer != "ok":
            fail(f"the simulator failed at '{text}'")

    try:
        status = asyncio.run(receive(command, count, batch))
    finally:
        child.stdin.close()
        child.wait(30)
    sys.exit(status)


async def receive(command, count, batch):
    from bleak import BleakClient, BleakScanner

    loop = asyncio.get_running_loop()
    state = {"received": 0, "target": -1, "checksum": 0}
    reached = asyncio.Event()

    def on_notification(_characteristic, data):
        if len(data) > 1:
            state["checksum"] += data[1]
        state["received"] += 1
        if state["received"] == state["target"]:
            reached.set()

    # The child adds the sensor once the adapter discovers: meanwhile the scanner runs.
    found, _ = await asyncio.gather(
        BleakScanner.find_device_by_name(NAME, timeout=300), loop.run_in_executor(None, command, "add"))
    if found is None:
        fail("the sensor was not found")
    client = BleakClient(found, timeout=300)
    await client.connect()
    await client.start_notify(MEASUREMENT, on_notification, bluez={"use_start_notify": False})
    if not getattr(client._backend, "_notification_fds", None):
        fail("bleak did not use AcquireNotify")
    await loop.run_in_executor(None, command, "check socket")

    sent = 0
    while sent < count:
        size = min(batch, count - sent)
        sent += size
        state["target"] = sent
        reached.clear()
        await loop.run_in_executor(None, command, f"notify {size}")
        try:
            await asyncio.wait_for(reached.wait(), 300)
        except asyncio.TimeoutError:
            fail(f"counted {state['received']} of {sent} notifications")
    await asyncio.sleep(0.1)
    if state["received"] != count:
        fail(f"counted {state['received']} notifications, expected {count}")
    print(f"received {state['received']} checksum {state['checksum']}", flush=True)
    await client.disconnect()
    return 0


if __name__ == "__main__":
    main()
