/* signal-sender ADDRESS N [DESTINATION] — emits N PropertiesChanged("org.bluez.GattCharacteristic1",
 * {"Value": <ay of 20 bytes>}, []) signals as fast as possible, flushing every
 * 64 signals so that the bus applies flow control, then flushes and exits.
 * With DESTINATION, each signal is addressed to that bus name (unicast, as a GATT
 * application's values go to bluetoothd alone), set after the body: libdbus rewrites the
 * header's signature field as the body's containers close, which costs more with a
 * destination field already in the header. */
#include "bench-common.h"

static DBusMessage *value_signal(unsigned long index) {
    unsigned char bytes[BENCH_VALUE_LENGTH];
    bench_value(index, bytes);
    return bench_value_signal(bytes, BENCH_VALUE_LENGTH);
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s ADDRESS N [DESTINATION]\n", argv[0]);
        return 2;
    }
    unsigned long count = bench_count_argument(argv[2]);
    DBusConnection *connection = bench_connect(argv[1]);
    for (unsigned long i = 0; i < count; i++) {
        DBusMessage *message = value_signal(i);
        if (argc == 4 && !dbus_message_set_destination(message, argv[3])) bench_die("out of memory", NULL);
        if (!dbus_connection_send(connection, message, NULL)) bench_die("send failed", NULL);
        dbus_message_unref(message);
        if (i % 64 == 63) dbus_connection_flush(connection);
    }
    dbus_connection_flush(connection);
    /* A round trip to the bus: everything sent before it has been read by the daemon. */
    DBusError error;
    dbus_error_init(&error);
    dbus_bus_get_unix_user(connection, dbus_bus_get_unique_name(connection), &error);
    dbus_error_free(&error);
    dbus_connection_close(connection);
    dbus_connection_unref(connection);
    printf("sent %lu\n", count);
    return 0;
}
