/* signal-sender ADDRESS N [DESTINATION] — emits N PropertiesChanged("org.bluez.GattCharacteristic1",
 * {"Value": <ay of 20 bytes>}, []) signals as fast as possible, flushing every
 * 64 signals so that the bus applies flow control, then flushes and exits.
 * With DESTINATION, each signal is addressed to that bus name (unicast, as a GATT
 * application's values go to bluetoothd alone), set after the body: libdbus rewrites the
 * header's signature field as the body's containers close, which costs more with a
 * destination field already in the header. */
#include "bench-common.h"

static DBusMessage *value_signal(unsigned long index) {
    DBusMessage *message =
        dbus_message_new_signal(BENCH_CHAR_PATH, BENCH_PROPERTIES_INTERFACE, BENCH_PROPERTIES_CHANGED);
    if (!message) bench_die("out of memory", NULL);
    DBusMessageIter iter, dict, entry, variant, array, invalidated;
    const char *interface = BENCH_CHAR_INTERFACE, *key = "Value";
    unsigned char bytes[BENCH_VALUE_LENGTH];
    const unsigned char *pointer = bytes;
    bench_value(index, bytes);
    dbus_message_iter_init_append(message, &iter);
    dbus_bool_t ok = dbus_message_iter_append_basic(&iter, DBUS_TYPE_STRING, &interface);
    ok = ok && dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "{sv}", &dict);
    ok = ok && dbus_message_iter_open_container(&dict, DBUS_TYPE_DICT_ENTRY, NULL, &entry);
    ok = ok && dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &key);
    ok = ok && dbus_message_iter_open_container(&entry, DBUS_TYPE_VARIANT, "ay", &variant);
    ok = ok && dbus_message_iter_open_container(&variant, DBUS_TYPE_ARRAY, "y", &array);
    ok = ok && dbus_message_iter_append_fixed_array(&array, DBUS_TYPE_BYTE, &pointer, BENCH_VALUE_LENGTH);
    ok = ok && dbus_message_iter_close_container(&variant, &array);
    ok = ok && dbus_message_iter_close_container(&entry, &variant);
    ok = ok && dbus_message_iter_close_container(&dict, &entry);
    ok = ok && dbus_message_iter_close_container(&iter, &dict);
    ok = ok && dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "s", &invalidated);
    ok = ok && dbus_message_iter_close_container(&iter, &invalidated);
    if (!ok) bench_die("out of memory", NULL);
    return message;
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
