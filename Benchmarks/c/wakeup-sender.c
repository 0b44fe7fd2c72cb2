/* wakeup-sender [--no-bus] INTERVAL_MS COUNT [DESTINATION] — the C floor of the send side
 * (Scripts/benchmark-wakeup-floor, driven by Scripts/guest/wakeup-floor.py).
 *
 * On one thread, on the system bus (DBUS_SYSTEM_BUS_ADDRESS honoured): every INTERVAL_MS on an
 * absolute clock_nanosleep schedule, builds PropertiesChanged("org.bluez.GattCharacteristic1",
 * {"Value": <ay: flags 0x00, the rate>}, []) with libdbus's iterators as signal-sender.c does,
 * addressed to DESTINATION when given (set after the body, as BlueZKit's updateValue addresses
 * bluetoothd), sends it (dbus_connection_send + dbus_connection_flush) and writes one line
 * {"bpm": N, "event": "notified"} to standard output with write(2) — what heart-rate-peripheral
 * does per measurement, with nothing around it. COUNT signals, then it exits. Incoming messages
 * are never read (no main loop): the few the bus sends stay in the socket. With --no-bus, no
 * bus at all: each tick only wakes up and writes its line (what the signal adds is the rest). */
#include "bench-common.h"
#include "wakeup-common.h"

#include <unistd.h>

static DBusMessage *value_signal(unsigned rate, const char *destination) {
    unsigned char bytes[2] = {0x00, (unsigned char)rate};
    DBusMessage *message = bench_value_signal(bytes, (int)sizeof bytes);
    if (destination && !dbus_message_set_destination(message, destination)) bench_die("out of memory", NULL);
    return message;
}

int main(int argc, char **argv) {
    int no_bus = argc > 1 && strcmp(argv[1], "--no-bus") == 0;
    if (no_bus) {
        argv++;
        argc--;
    }
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s [--no-bus] INTERVAL_MS COUNT [DESTINATION]\n", argv[0]);
        return 2;
    }
    long interval_ns = (long)wakeup_number(argv[1], 1) * 1000000L;
    unsigned long count = wakeup_number(argv[2], 1);
    const char *destination = argc == 4 && argv[3][0] ? argv[3] : NULL;
    DBusError error;
    dbus_error_init(&error);
    DBusConnection *connection = NULL;
    if (!no_bus) {
        connection = dbus_bus_get_private(DBUS_BUS_SYSTEM, &error);
        if (!connection) bench_die("cannot connect to the system bus", &error);
        dbus_connection_set_exit_on_disconnect(connection, FALSE);
    }
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (unsigned long i = 0; i < count; i++) {
        wakeup_advance(&next, interval_ns);
        wakeup_sleep_until(&next);
        unsigned rate = wakeup_rate(i);
        if (connection) {
            DBusMessage *message = value_signal(rate, destination);
            if (!dbus_connection_send(connection, message, NULL)) bench_die("send failed", NULL);
            dbus_connection_flush(connection);
            dbus_message_unref(message);
        }
        char line[64];
        int length = snprintf(line, sizeof line, "{\"bpm\": %u, \"event\": \"notified\"}\n", rate);
        if (write(1, line, (size_t)length) != length) wakeup_die("write");
    }
    if (connection) {
        dbus_connection_close(connection);
        dbus_connection_unref(connection);
    }
    return 0;
}
