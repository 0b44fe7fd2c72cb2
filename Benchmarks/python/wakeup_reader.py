"""The Python reader of the receive floor (Scripts/benchmark-wakeup-floor), shaped as bleak's.

    python3 wakeup_reader.py FD

Reads the datagrams Benchmarks/c/wakeup-writer.c sends on the inherited SOCK_SEQPACKET socket
FD the way bleak reads an AcquireNotify socket (bleak/backends/bluezdbus/client.py,
_register_notify_fd_reader): asyncio's loop.add_reader, os.read(fd, 1024) in the reader
callback, and the user's callback with a bytearray, which decodes the heart rate. Prints
"ready" once the loop waits, and "received COUNT sum SUM" when the writer closed its end.
"""

import asyncio
import os
import sys

received = 0
total = 0


def on_value(data):
    """The user's callback: the heart rate of a measurement (8 or 16 bits, flags bit 0)."""
    global received, total
    received += 1
    if len(data) >= 3 and data[0] & 0x01:
        total += int.from_bytes(data[1:3], "little")
    elif len(data) >= 2:
        total += data[1]


def main():
    fd = int(sys.argv[1])
    loop = asyncio.new_event_loop()
    done = loop.create_future()

    def on_data():
        data = os.read(fd, 1024)
        if not data:  # the writer never sends an empty datagram: this is the end
            loop.remove_reader(fd)
            done.set_result(None)
            return
        on_value(bytearray(data))

    loop.add_reader(fd, on_data)
    loop.call_soon(lambda: print("ready", flush=True))
    loop.run_until_complete(done)
    loop.close()
    print(f"received {received} sum {total}", flush=True)


if __name__ == "__main__":
    main()
