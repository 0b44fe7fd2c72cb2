#!/usr/bin/python3
"""python-central — a small GATT central on the real bluetoothd, written with dbus-python.

An outside judge of BlueZKit's peripheral role (Tests/EndToEndTests/PythonCentralEndToEndTests):
nothing of BlueZKit is used here, only bluetoothd's D-Bus API (doc/adapter-api.txt,
doc/device-api.txt, doc/gatt-api.txt of BlueZ 5.66) through dbus-python and a GLib main loop.
Needs Debian's /usr/bin/python3 with python3-dbus and python3-gi; no PyPI packages.

  python-central --adapter hci0 --service UUID --read UUID --write UUID --write-value HEX
                 --notify UUID [--count N] [--timeout SECONDS]

Steps, each reported as one JSON object on its own line of standard output:
  1. discovery on ADAPTER with a filter on the service UUID (LE) {"event":"scanning"}
  2. the first Device1 of ADAPTER whose UUIDs hold the service   {"event":"found",...}
  3. Device1.Connect, then ServicesResolved                       {"event":"connected"}
  4. the three characteristics, by UUID, in that service of it    {"event":"resolved"}
  5. ReadValue of --read                                           {"event":"read","value":HEX}
  6. WriteValue of --write-value to --write (type "request")       {"event":"write","value":HEX}
  7. StartNotify on --notify, N values from PropertiesChanged(Value), StopNotify
         {"event":"notify","path":"start","value":HEX} ×N, then {"event":"unsubscribed","path":"start"}
  8. AcquireNotify on --notify: N datagrams read from the returned socket, which is closed then
         {"event":"acquired","mtu":M}, {"event":"notify","path":"acquire","value":HEX,"mtu":M} ×N,
         {"event":"unsubscribed","path":"acquire"}
  9. Device1.Disconnect                                            {"event":"disconnected"}
                                                                   {"event":"done"}
Any failure prints {"event":"error","step":...,"message":...}, disconnects (best effort) and
exits 1; --timeout (default 120 s) bounds the whole run. Exit status 0 after "done".
"""

import argparse
import fcntl
import json
import os
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

BLUEZ = "org.bluez"
OBJECT_MANAGER = "org.freedesktop.DBus.ObjectManager"
PROPERTIES = "org.freedesktop.DBus.Properties"
ADAPTER = "org.bluez.Adapter1"
DEVICE = "org.bluez.Device1"
SERVICE = "org.bluez.GattService1"
CHARACTERISTIC = "org.bluez.GattCharacteristic1"
BASE_UUID_TAIL = "-0000-1000-8000-00805f9b34fb"


def full_uuid(text):
    """A 16- or 32-bit UUID in hex, or a 128-bit one: its lower-case 128-bit form."""
    text = text.strip().lower()
    if len(text) == 4:
        return "0000" + text + BASE_UUID_TAIL
    if len(text) == 8:
        return text + BASE_UUID_TAIL
    return text


def hex_of(value):
    return bytes(int(b) for b in value).hex()


def emit(event, **fields):
    record = {"event": event}
    record.update(fields)
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


class Failure(Exception):
    pass


def guarded(method):
    """A main-loop callback: an exception in it (a failed synchronous call) fails the run."""
    def wrapper(self, *arguments, **keywords):
        return self.guard(method, self, *arguments, **keywords)
    return wrapper


class Central:
    def __init__(self, args):
        self.args = args
        self.service_uuid = full_uuid(args.service)
        self.read_uuid = full_uuid(args.read)
        self.write_uuid = full_uuid(args.write)
        self.notify_uuid = full_uuid(args.notify)
        self.write_value = bytes.fromhex(args.write_value)
        self.bus = dbus.SystemBus()
        self.loop = GLib.MainLoop()
        self.adapter_path = "/org/bluez/" + args.adapter
        self.step = "start"
        self.status = None
        self.device_path = None
        self.discovering = False
        self.connect_sent = False
        self.connected = False
        self.chars = None
        self.phase = None  # "start" / "acquire" while values are counted
        self.received = 0
        self.fd = None
        self.mtu = None
        self.watch = None

    # Plumbing

    def obj(self, path, interface):
        return dbus.Interface(self.bus.get_object(BLUEZ, path), interface)

    def call(self, path, interface, method, *arguments, reply=None, timeout=30):
        """An asynchronous call whose failure fails the run at the current step."""
        step = self.step

        def on_reply(*result):
            if reply:
                self.guard(reply, *result)

        def on_error(error):
            self.fail("%s.%s: %s" % (interface, method, error.get_dbus_message() or error.get_dbus_name()),
                      step=step)

        getattr(self.obj(path, interface), method)(
            *arguments, reply_handler=on_reply, error_handler=on_error, timeout=timeout)

    def guard(self, function, *arguments, **keywords):
        if self.status is not None:
            return False
        try:
            return function(*arguments, **keywords)
        except Failure as failure:
            self.fail(str(failure))
        except Exception as exception:
            self.fail("%s: %s" % (type(exception).__name__, exception))
        return False

    def fail(self, message, step=None):
        if self.status is not None:
            return
        emit("error", step=step or self.step, message=message)
        self.finish(1)

    def finish(self, status):
        self.status = status
        self.release_socket()
        if status != 0:
            # Best effort: leave no discovery session or link behind for the next test.
            if self.discovering:
                try:
                    self.obj(self.adapter_path, ADAPTER).StopDiscovery(timeout=5)
                except dbus.DBusException:
                    pass
            if self.device_path and self.connect_sent:
                try:
                    self.obj(self.device_path, DEVICE).Disconnect(timeout=10)
                except dbus.DBusException:
                    pass
        self.loop.quit()

    def managed_objects(self):
        return self.obj("/", OBJECT_MANAGER).GetManagedObjects(timeout=10)

    # Run

    def run(self):
        GLib.timeout_add_seconds(self.args.timeout, self.on_timeout)
        self.bus.add_signal_receiver(
            self.on_interfaces_added, signal_name="InterfacesAdded", dbus_interface=OBJECT_MANAGER,
            bus_name=BLUEZ)
        self.bus.add_signal_receiver(
            self.on_properties_changed, signal_name="PropertiesChanged", dbus_interface=PROPERTIES,
            bus_name=BLUEZ, path_keyword="path")
        GLib.idle_add(self.start_discovery)
        self.loop.run()
        return self.status if self.status is not None else 1

    @guarded
    def on_timeout(self):
        self.fail("timed out after %d s" % self.args.timeout)
        return False

    @guarded
    def start_discovery(self):
        self.step = "discovery"
        objects = self.managed_objects()
        if ADAPTER not in objects.get(dbus.ObjectPath(self.adapter_path), {}):
            self.fail("no adapter %s" % self.adapter_path)
            return False
        discovery_filter = {"Transport": "le"}
        # bluetoothd 5.87 dies on a filter with UUIDs (BlueZ issue 2282); its Modalias is its own
        # Device ID. There the filter goes without them: consider_device checks the service anyway.
        modalias = str(objects[dbus.ObjectPath(self.adapter_path)][ADAPTER].get("Modalias", ""))
        if modalias.split(":")[-1].upper() != "V1D6BP0246D0557":
            discovery_filter["UUIDs"] = dbus.Array([self.service_uuid], signature="s")

        def started():
            self.discovering = True
            emit("scanning", adapter=self.args.adapter)
            # A device bluetoothd already knows (and still sees) counts too.
            for path, interfaces in self.managed_objects().items():
                if DEVICE in interfaces:
                    self.consider_device(path, interfaces[DEVICE])

        self.call(self.adapter_path, ADAPTER, "SetDiscoveryFilter", dbus.Dictionary(discovery_filter, signature="sv"),
                  reply=lambda: self.call(self.adapter_path, ADAPTER, "StartDiscovery", reply=started))
        return False

    # Signals

    @guarded
    def on_interfaces_added(self, path, interfaces):
        if DEVICE in interfaces and self.discovering:
            self.consider_device(path, interfaces[DEVICE])
        if CHARACTERISTIC in interfaces and self.step == "characteristics":
            self.find_characteristics()

    @guarded
    def on_properties_changed(self, interface, changed, invalidated, path=None):
        if interface == DEVICE:
            if self.device_path is None and self.discovering and "UUIDs" in changed:
                properties = self.obj(path, PROPERTIES).GetAll(DEVICE, timeout=10)
                self.consider_device(path, properties)
            elif path == self.device_path:
                if changed.get("ServicesResolved") and self.step == "connect" and self.connected:
                    self.services_resolved()
                if "Connected" in changed and not changed["Connected"] and self.step not in ("connect", "disconnect"):
                    self.fail("the link went down")
        elif interface == CHARACTERISTIC and "Value" in changed and self.chars \
                and path == self.chars["notify"] and self.phase == "start":
            self.received_value(changed["Value"])

    # Steps

    def consider_device(self, path, properties):
        if self.device_path is not None:
            return
        if str(properties.get("Adapter", "")) != self.adapter_path:
            return
        uuids = [full_uuid(str(u)) for u in properties.get("UUIDs", [])]
        if self.service_uuid not in uuids:
            return
        self.device_path = str(path)
        emit("found", device=self.device_path, address=str(properties.get("Address", "")))
        self.step = "stop-discovery"

        def stopped():
            self.discovering = False
            self.connect()

        self.call(self.adapter_path, ADAPTER, "StopDiscovery", reply=stopped)

    def connect(self):
        self.step = "connect"
        self.connect_sent = True

        def connected():
            self.connected = True
            emit("connected", device=self.device_path)
            resolved = self.obj(self.device_path, PROPERTIES).Get(DEVICE, "ServicesResolved", timeout=10)
            if resolved:
                self.services_resolved()

        self.call(self.device_path, DEVICE, "Connect", reply=connected, timeout=90)

    def services_resolved(self):
        self.step = "characteristics"
        self.find_characteristics()

    def find_characteristics(self):
        """The characteristics under the device, in a service with our UUID (the objects can
        follow ServicesResolved: InterfacesAdded calls this again)."""
        objects = self.managed_objects()
        services = set()
        for path, interfaces in objects.items():
            service = interfaces.get(SERVICE)
            if service and str(service.get("Device", "")) == self.device_path \
                    and full_uuid(str(service["UUID"])) == self.service_uuid:
                services.add(str(path))
        found = {}
        for path, interfaces in objects.items():
            characteristic = interfaces.get(CHARACTERISTIC)
            if not characteristic or str(characteristic.get("Service", "")) not in services:
                continue
            uuid = full_uuid(str(characteristic["UUID"]))
            for role, wanted in (("read", self.read_uuid), ("write", self.write_uuid),
                                 ("notify", self.notify_uuid)):
                if uuid == wanted:
                    found[role] = str(path)
        if len(found) < 3:
            return
        self.chars = found
        emit("resolved", **found)
        self.read()

    def read(self):
        self.step = "read"

        def done(value):
            emit("read", value=hex_of(value))
            self.write()

        self.call(self.chars["read"], CHARACTERISTIC, "ReadValue", dbus.Dictionary({}, signature="sv"), reply=done)

    def write(self):
        self.step = "write"
        value = dbus.Array([dbus.Byte(b) for b in self.write_value], signature="y")
        options = dbus.Dictionary({"type": "request"}, signature="sv")

        def done():
            emit("write", value=self.write_value.hex())
            self.start_notify()

        self.call(self.chars["write"], CHARACTERISTIC, "WriteValue", value, options, reply=done)

    def start_notify(self):
        self.step = "start-notify"
        # Count from now on: values can arrive before StartNotify's reply.
        self.phase = "start"
        self.received = 0
        self.call(self.chars["notify"], CHARACTERISTIC, "StartNotify", reply=lambda: emit("subscribed", path="start"))

    def received_value(self, value, mtu=None):
        fields = {"path": self.phase, "value": hex_of(value)}
        if mtu is not None:
            fields["mtu"] = mtu
        emit("notify", **fields)
        self.received += 1
        if self.received < self.args.count:
            return
        if self.phase == "start":
            self.phase = None  # values still in flight are not counted
            self.step = "stop-notify"

            def stopped():
                emit("unsubscribed", path="start")
                self.acquire_notify()

            self.call(self.chars["notify"], CHARACTERISTIC, "StopNotify", reply=stopped)
        else:
            self.phase = None  # on_socket closes the socket

    def acquire_notify(self):
        self.step = "acquire-notify"

        def acquired(fd, mtu):
            self.fd = fd.take()
            self.mtu = int(mtu)
            flags = fcntl.fcntl(self.fd, fcntl.F_GETFL)
            fcntl.fcntl(self.fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
            emit("acquired", path="acquire", mtu=self.mtu)
            self.phase = "acquire"
            self.received = 0
            self.watch = GLib.io_add_watch(self.fd, GLib.IO_IN | GLib.IO_HUP | GLib.IO_ERR, self.on_socket)

        self.call(self.chars["notify"], CHARACTERISTIC, "AcquireNotify", dbus.Dictionary({}, signature="sv"),
                  reply=acquired)

    @guarded
    def on_socket(self, fd, condition):
        """Reads every datagram waiting (one notification each); closes the socket after N."""
        while self.phase == "acquire":
            try:
                datagram = os.read(self.fd, max(self.mtu or 0, 512))
            except BlockingIOError:
                break
            except InterruptedError:
                continue
            if not datagram:
                raise Failure("bluetoothd closed the notify socket")
            self.received_value(datagram, mtu=self.mtu)
        if self.phase != "acquire":
            self.watch = None  # returning False removes it
            self.release_socket()
            emit("unsubscribed", path="acquire")
            self.disconnect()
            return False
        if condition & (GLib.IO_HUP | GLib.IO_ERR):
            raise Failure("the notify socket hung up")
        return True

    def release_socket(self):
        if self.watch is not None:
            GLib.source_remove(self.watch)
            self.watch = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def disconnect(self):
        self.step = "disconnect"

        def done():
            emit("disconnected", device=self.device_path)
            emit("done")
            self.finish(0)

        self.call(self.device_path, DEVICE, "Disconnect", reply=done)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter", default="hci0")
    parser.add_argument("--service", required=True)
    parser.add_argument("--read", required=True)
    parser.add_argument("--write", required=True)
    parser.add_argument("--write-value", default="c0ffee", help="hex bytes to write (default c0ffee)")
    parser.add_argument("--notify", required=True)
    parser.add_argument("--count", type=int, default=3, help="values per subscription path (default 3)")
    parser.add_argument("--timeout", type=int, default=120, help="seconds for the whole run (default 120)")
    args = parser.parse_args()
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    try:
        central = Central(args)
    except (dbus.DBusException, ValueError) as error:
        emit("error", step="start", message=str(error))
        return 1
    return central.run()


if __name__ == "__main__":
    sys.exit(main())
