/* Shared names and helpers of the C reference programs for Scripts/benchmark-dbus.
 * The Swift side (Benchmarks/DBusBenchmark/main.swift) uses the same names. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <dbus/dbus.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <unistd.h>

/* The notification every receiver decodes: a BLE characteristic value. */
#define BENCH_CHAR_PATH "/org/bluez/hci0/dev_00_11_22_33_44_55/service0010/char0011"
#define BENCH_CHAR_INTERFACE "org.bluez.GattCharacteristic1"
#define BENCH_PROPERTIES_INTERFACE "org.freedesktop.DBus.Properties"
#define BENCH_PROPERTIES_CHANGED "PropertiesChanged"
#define BENCH_MATCH_RULE \
    "type='signal',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged'"
#define BENCH_VALUE_LENGTH 20

/* The method-call echo: Echo(ay) -> ay. */
#define BENCH_ECHO_NAME_C "org.bluezkit.Benchmark.EchoC"
#define BENCH_ECHO_PATH "/org/bluezkit/Benchmark"
#define BENCH_ECHO_INTERFACE "org.bluezkit.Benchmark"
#define BENCH_ECHO_METHOD "Echo"
#define BENCH_QUIT_METHOD "Quit"

/* Writes all of `line` to standard output with write(2), retrying on EINTR; exits on failure
 * (the benchmark's driver reads the lines, so a lost line is a failed run). */
static inline void bench_write_line(const char *line, size_t length) {
    while (length > 0) {
        ssize_t written = write(1, line, length);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) exit(1);
        line += written;
        length -= (size_t)written;
    }
}

static inline void bench_die(const char *what, DBusError *error) {
    fprintf(stderr, "%s%s%s\n", what, error && error->message ? ": " : "",
            error && error->message ? error->message : "");
    exit(1);
}

/* A private connection to `address`, registered with the bus (Hello). */
static inline DBusConnection *bench_connect(const char *address) {
    DBusError error;
    dbus_error_init(&error);
    DBusConnection *connection = dbus_connection_open_private(address, &error);
    if (!connection) bench_die("cannot connect", &error);
    dbus_connection_set_exit_on_disconnect(connection, FALSE);
    if (!dbus_bus_register(connection, &error)) bench_die("cannot register with the bus", &error);
    return connection;
}

/* The value bytes of notification number `index` (the sender's and the checker's view). */
static inline void bench_value(unsigned long index, unsigned char *bytes) {
    for (int i = 0; i < BENCH_VALUE_LENGTH; i++) bytes[i] = (unsigned char)(index * 7 + (unsigned long)i);
}

/* PropertiesChanged("org.bluez.GattCharacteristic1", {"Value": <ay: BYTES>}, []), as
 * BlueZKit's updateValue emits it; the caller addresses it (after the body) if it wants. */
static inline DBusMessage *bench_value_signal(const unsigned char *bytes, int length) {
    DBusMessage *message =
        dbus_message_new_signal(BENCH_CHAR_PATH, BENCH_PROPERTIES_INTERFACE, BENCH_PROPERTIES_CHANGED);
    if (!message) bench_die("out of memory", NULL);
    DBusMessageIter iter, dict, entry, variant, array, invalidated;
    const char *interface = BENCH_CHAR_INTERFACE, *key = "Value";
    dbus_message_iter_init_append(message, &iter);
    dbus_bool_t ok = dbus_message_iter_append_basic(&iter, DBUS_TYPE_STRING, &interface);
    ok = ok && dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "{sv}", &dict);
    ok = ok && dbus_message_iter_open_container(&dict, DBUS_TYPE_DICT_ENTRY, NULL, &entry);
    ok = ok && dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &key);
    ok = ok && dbus_message_iter_open_container(&entry, DBUS_TYPE_VARIANT, "ay", &variant);
    ok = ok && dbus_message_iter_open_container(&variant, DBUS_TYPE_ARRAY, "y", &array);
    ok = ok && dbus_message_iter_append_fixed_array(&array, DBUS_TYPE_BYTE, &bytes, length);
    ok = ok && dbus_message_iter_close_container(&variant, &array);
    ok = ok && dbus_message_iter_close_container(&entry, &variant);
    ok = ok && dbus_message_iter_close_container(&dict, &entry);
    ok = ok && dbus_message_iter_close_container(&iter, &dict);
    ok = ok && dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "s", &invalidated);
    ok = ok && dbus_message_iter_close_container(&iter, &invalidated);
    if (!ok) bench_die("out of memory", NULL);
    return message;
}

/* The consumer's checksum step; the Swift receiver computes the same. */
static inline uint64_t bench_checksum(uint64_t sum, const unsigned char *bytes, int count) {
    for (int i = 0; i < count; i++) sum = sum * 31 + bytes[i];
    return sum;
}

static inline double bench_now_us(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec * 1e6 + (double)now.tv_nsec / 1e3;
}

static inline unsigned long bench_count_argument(const char *text) {
    char *end = NULL;
    unsigned long value = strtoul(text, &end, 10);
    if (!end || *end || value == 0) {
        fprintf(stderr, "not a positive count: %s\n", text);
        exit(2);
    }
    return value;
}

#endif
