"""The Python receiver of the signal floor (Scripts/benchmark-wakeup-floor --only signal), shaped as bleak's.

    python3 wakeup_signal_receiver.py COUNT

On the system bus with dbus-fast's asyncio MessageBus (what bleak uses): adds the match rule
for PropertiesChanged (bleak's BlueZManager adds one for org.bluez's signals), and a message
handler that takes the "Value" of a PropertiesChanged("org.bluez.GattCharacteristic1", ...)
as bleak hands a StartNotify value to its user's callback (a bytearray), decodes the heart
rate and writes one line {"bpm": N, "event": "heartRate"} to standard output with os.write, as
Benchmarks/python/bleak_central.py prints a reading. Prints "ready" once the bus has the rule,
exits after COUNT values.
"""

import asyncio
import os
import sys

from dbus_fast import BusType, Message, MessageType  # type: ignore
from dbus_fast.aio import MessageBus  # type: ignore

RULE = "type='signal',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged'"
INTERFACE = "org.bluez.GattCharacteristic1"


async def main():
    count = int(sys.argv[1])
    bus = await MessageBus(bus_type=BusType.SYSTEM).connect()
    done = asyncio.get_running_loop().create_future()
    seen = 0

    def on_message(message):
        nonlocal seen
        if message.message_type != MessageType.SIGNAL or message.member != "PropertiesChanged":
            return
        interface, changed, _invalidated = message.body
        if interface != INTERFACE or "Value" not in changed:
            return
        data = bytearray(changed["Value"].value)
        rate = data[1] if len(data) >= 2 else 0
        os.write(1, b'{"bpm": %d, "event": "heartRate"}\n' % rate)
        seen += 1
        if seen == count and not done.done():
            done.set_result(None)

    bus.add_message_handler(on_message)
    reply = await bus.call(Message(destination="org.freedesktop.DBus", path="/org/freedesktop/DBus",
                                   interface="org.freedesktop.DBus", member="AddMatch", signature="s",
                                   body=[RULE]))
    if reply.message_type != MessageType.METHOD_RETURN:
        sys.exit(f"AddMatch failed: {reply.body}")
    print("ready", flush=True)
    await done
    bus.disconnect()


if __name__ == "__main__":
    asyncio.run(main())
