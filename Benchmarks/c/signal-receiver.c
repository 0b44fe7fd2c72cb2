/* signal-receiver [--lines] ADDRESS N — the C reference receiver.
 *
 * Adds a match rule for PropertiesChanged, and for each signal of the shape
 * PropertiesChanged("org.bluez.GattCharacteristic1", {"Value": <ay>}, []) takes
 * the Value bytes with DBusMessageIter + dbus_message_iter_get_fixed_array and
 * hands them to a cheap consumer (a checksum). It checks the same things the
 * Swift fast path (DBusMessage.propertiesChangedValueBytes(of:)) checks.
 * Prints "ready" once the bus has the rule, and exits after N values. With --lines it also
 * writes one line {"bpm": N, "event": "heartRate"} per value (N: the value's second byte, a
 * heart rate) with write(2), as heart-rate-central prints a reading: the receive floor of
 * Scripts/benchmark-wakeup-floor --only signal. */
#include "bench-common.h"

#include <unistd.h>

struct receiver {
    unsigned long target;
    unsigned long values;
    unsigned long others;
    uint64_t checksum;
    int lines;
};

static void consume(struct receiver *state, const unsigned char *bytes, int count) {
    state->checksum = bench_checksum(state->checksum, bytes, count);
    state->values++;
    if (state->lines) {
        char line[64];
        int length = snprintf(line, sizeof line, "{\"bpm\": %u, \"event\": \"heartRate\"}\n",
                              count > 1 ? (unsigned)bytes[1] : 0u);
        if (write(1, line, (size_t)length) != length) bench_die("write failed", NULL);
    }
}

/* Returns the Value bytes of a matching signal, or FALSE for any other shape. */
static dbus_bool_t value_bytes(DBusMessage *message, const unsigned char **bytes, int *count) {
    if (!dbus_message_has_signature(message, "sa{sv}as")) return FALSE;
    DBusMessageIter iter, dict, entry, variant, array;
    if (!dbus_message_iter_init(message, &iter)) return FALSE;
    const char *interface = NULL;
    dbus_message_iter_get_basic(&iter, &interface);
    if (strcmp(interface, BENCH_CHAR_INTERFACE) != 0) return FALSE;
    dbus_message_iter_next(&iter);
    dbus_message_iter_recurse(&iter, &dict);
    if (dbus_message_iter_get_arg_type(&dict) != DBUS_TYPE_DICT_ENTRY) return FALSE;
    dbus_message_iter_recurse(&dict, &entry);
    const char *key = NULL;
    dbus_message_iter_get_basic(&entry, &key);
    if (strcmp(key, "Value") != 0) return FALSE;
    dbus_message_iter_next(&entry);
    dbus_message_iter_recurse(&entry, &variant);
    if (dbus_message_iter_get_arg_type(&variant) != DBUS_TYPE_ARRAY ||
        dbus_message_iter_get_element_type(&variant) != DBUS_TYPE_BYTE)
        return FALSE;
    if (dbus_message_iter_next(&dict)) return FALSE;  /* only one changed property */
    dbus_message_iter_next(&iter);
    if (dbus_message_iter_get_element_count(&iter) != 0) return FALSE;  /* nothing invalidated */
    dbus_message_iter_recurse(&variant, &array);
    dbus_message_iter_get_fixed_array(&array, bytes, count);
    return TRUE;
}

static DBusHandlerResult filter(DBusConnection *connection, DBusMessage *message, void *data) {
    (void)connection;
    struct receiver *state = data;
    if (!dbus_message_is_signal(message, BENCH_PROPERTIES_INTERFACE, BENCH_PROPERTIES_CHANGED))
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    const unsigned char *bytes = NULL;
    int count = 0;
    if (value_bytes(message, &bytes, &count))
        consume(state, bytes, count);
    else
        state->others++;
    return DBUS_HANDLER_RESULT_HANDLED;
}

int main(int argc, char **argv) {
    int lines = argc > 1 && strcmp(argv[1], "--lines") == 0;
    if (lines) {
        argv++;
        argc--;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: %s [--lines] ADDRESS N\n", argv[0]);
        return 2;
    }
    struct receiver state = {.target = bench_count_argument(argv[2]), .lines = lines};
    DBusConnection *connection = bench_connect(argv[1]);
    DBusError error;
    dbus_error_init(&error);
    dbus_bus_add_match(connection, BENCH_MATCH_RULE, &error); /* waits for the bus's reply */
    if (dbus_error_is_set(&error)) bench_die("AddMatch failed", &error);
    if (!dbus_connection_add_filter(connection, filter, &state, NULL)) bench_die("out of memory", NULL);
    printf("ready\n");
    fflush(stdout);
    while (state.values < state.target && dbus_connection_read_write_dispatch(connection, -1)) {
    }
    printf("received %lu values, %lu other signals, checksum %llu\n", state.values, state.others,
           (unsigned long long)state.checksum);
    fflush(stdout);
    return state.values == state.target ? 0 : 1;
}
