"""The Python side of the object-cache comparison in Scripts/benchmark.

    python object_cache.py FILE ITERATIONS

FILE holds one GetManagedObjects method return in wire form (written by
`ObjectCacheBenchmark generate`). Each iteration does what bleak does with
bluetoothd's reply when it starts (BlueZManager.async_init): dbus-fast's
Unmarshaller reads the message from the bytes, then every object's interfaces
go through unpack_variants into a dict by path. Prints
"python_ms MEDIAN MIN MAX" (milliseconds per iteration, after 3 warm-ups) and
"objects N devices M properties P".
"""

import io
import statistics
import sys
import time

from dbus_fast import MessageType
from dbus_fast._private.unmarshaller import Unmarshaller

try:  # where bleak takes it from (bleak.backends.bluezdbus.manager)
    from dbus_fast import unpack_variants
except ImportError:  # older dbus-fast: bleak's own copy
    from bleak.backends.bluezdbus.utils import unpack_variants


def build_cache(blob):
    unmarshaller = Unmarshaller(io.BytesIO(blob))
    message = unmarshaller.unmarshall()
    if message is None or message.message_type != MessageType.METHOD_RETURN:
        raise SystemExit("object_cache.py: the file is not one method return")
    properties = {}
    for path, interfaces in message.body[0].items():
        properties[path] = unpack_variants(interfaces)
    return properties


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: object_cache.py FILE ITERATIONS")
    with open(sys.argv[1], "rb") as handle:
        blob = handle.read()
    iterations = int(sys.argv[2])
    for _ in range(3):
        cache = build_cache(blob)
    samples = []
    for _ in range(iterations):
        start = time.perf_counter_ns()
        cache = build_cache(blob)
        samples.append(time.perf_counter_ns() - start)
    devices = sum(1 for interfaces in cache.values() if "org.bluez.Device1" in interfaces)
    properties = sum(len(p) for interfaces in cache.values() for p in interfaces.values())
    ms = [s / 1e6 for s in samples]
    print(f"python_ms {statistics.median(ms):.4f} {min(ms):.4f} {max(ms):.4f}")
    print(f"objects {len(cache)} devices {devices} properties {properties}")


if __name__ == "__main__":
    main()
