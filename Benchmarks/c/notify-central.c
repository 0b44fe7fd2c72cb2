/* notify-central [--adapter hciN] [--name NAME | --device PATH] [--count N] [--timeout S]
 *
 * The C floor of the end-to-end central (Scripts/guest/e2e-benchmark.py, side "c"): what
 * heart-rate-central --json does on its default path (StartNotify: every value a
 * PropertiesChanged signal from bluetoothd), with libdbus alone and nothing more.
 *
 * On the system bus (or DBUS_SYSTEM_BUS_ADDRESS's): finds the device named NAME (default
 * "BlueZKit Bench") on the adapter (default hci0) — among the known objects, else by
 * discovery (SetDiscoveryFilter le, StartDiscovery, InterfacesAdded / PropertiesChanged) — or
 * takes the device object PATH; prints its "discovered" line, connects (Device1.Connect) when
 * it is not connected, waits for ServicesResolved, finds the Heart Rate Measurement
 * characteristic (0x2A37) under the device (GetManagedObjects), drops the set-up's match rule
 * for one on PropertiesChanged of that characteristic's path (and one on the device's, to see
 * the link drop), calls StartNotify, and for every Value decodes the measurement as
 * HeartRateMeasurement(decoding:) does and writes heart-rate-central --json's line for it,
 * byte for byte, with one write(2):
 *
 *     {"bpm":78,"energyExpended":12,"event":"heartRate","rrIntervals":[0.771484375]}
 *
 * (energyExpended and rrIntervals only when the value has them; an RR interval in seconds as
 * Swift's Double.description gives k / 1024: its exact decimal digits, at least one after the
 * point). After N readings (--count, default unlimited) it disconnects (Device1.Disconnect, as
 * heart-rate-central's cancelPeripheralConnection) and exits 0; exits 1 when the device is not
 * found within S seconds (default 60), a call fails, or the link drops. */
#define _POSIX_C_SOURCE 200809L

#include "bench-common.h"

#include <errno.h>
#include <stdarg.h>
#include <unistd.h>

#define BLUEZ "org.bluez"
#define DEVICE_INTERFACE "org.bluez.Device1"
#define ADAPTER_INTERFACE "org.bluez.Adapter1"
#define OBJECT_MANAGER "org.freedesktop.DBus.ObjectManager"
#define MEASUREMENT_UUID "00002a37-0000-1000-8000-00805f9b34fb"
#define CALL_TIMEOUT_MS 60000

static DBusConnection *bus;

/* --- Output ------------------------------------------------------------------------------ */

/* Writes the whole line with write(2), again after a short write or EINTR. */
/* Appends `text` to `line` at `*at` (the caller leaves room). */
static void append(char *line, size_t *at, const char *text) {
    size_t length = strlen(text);
    memcpy(line + *at, text, length);
    *at += length;
}

static void append_unsigned(char *line, size_t *at, unsigned value) {
    char digits[12];
    int length = 0;
    do {
        digits[length++] = (char)('0' + value % 10);
        value /= 10;
    } while (value > 0);
    while (length > 0) line[(*at)++] = digits[--length];
}

/* k / 1024 as Swift's Double.description prints it: the value has at most ten decimals, all
 * exact, and no shorter decimal rounds to the same Double, so its digits without trailing
 * zeros (at least one, "1.0"). */
static void append_rr_seconds(char *line, size_t *at, unsigned interval) {
    append_unsigned(line, at, interval / 1024);
    line[(*at)++] = '.';
    unsigned long long fraction = (unsigned long long)(interval % 1024) * 9765625ULL; /* 10^10 / 1024 */
    if (fraction == 0) {
        line[(*at)++] = '0';
        return;
    }
    char digits[10];
    for (int i = 9; i >= 0; i--) {
        digits[i] = (char)('0' + fraction % 10);
        fraction /= 10;
    }
    int last = 9;
    while (digits[last] == '0') last--;
    memcpy(line + *at, digits, (size_t)last + 1);
    *at += (size_t)last + 1;
}

/* A JSON string (quote, backslash and control characters escaped), as EventOutput writes it. */
static void append_quoted(char *line, size_t *at, size_t room, const char *text) {
    line[(*at)++] = '"';
    for (const unsigned char *c = (const unsigned char *)text; *c && *at + 8 < room; c++) {
        if (*c == '"' || *c == '\\') {
            line[(*at)++] = '\\';
            line[(*at)++] = (char)*c;
        } else if (*c < 0x20) {
            *at += (size_t)snprintf(line + *at, room - *at, "\\u%04x", *c);
        } else {
            line[(*at)++] = (char)*c;
        }
    }
    line[(*at)++] = '"';
}

static void emit_error(const char *message) {
    char line[512];
    size_t at = 0;
    append(line, &at, "{\"event\":\"error\",\"message\":");
    append_quoted(line, &at, sizeof line - 4, message);
    append(line, &at, "}\n");
    bench_write_line(line, at);
}

static void fail(const char *what, DBusError *error) {
    char message[400];
    snprintf(message, sizeof message, "%s%s%s", what, error && error->message ? ": " : "",
             error && error->message ? error->message : "");
    emit_error(message);
    exit(1);
}

/* --- The measurement --------------------------------------------------------------------- */

/* Decodes a Heart Rate Measurement and writes heart-rate-central's line for it; FALSE (with
 * an error line) for a value HeartRateMeasurement(decoding:) refuses. */
static int emit_reading(const unsigned char *bytes, int count) {
    /* 20 bytes at most from one ATT notification of the default MTU; a longer value has at
     * most (count - 2) / 2 intervals, each up to 16 characters. */
    char line[96 + 17 * 256];
    size_t at = 0;
    if (count < 1) return emit_error("unreadable measurement: an empty heart rate measurement"), 0;
    if (count > 512) return emit_error("unreadable measurement: a value longer than 512 bytes"), 0;
    unsigned flags = bytes[0], bpm;
    int index = 1;
    if (flags & 0x01) {
        if (index + 2 > count) goto short_value;
        bpm = (unsigned)bytes[1] | (unsigned)bytes[2] << 8;
        index = 3;
    } else {
        if (count < 2) return emit_error("unreadable measurement: a heart rate measurement without a rate"), 0;
        bpm = bytes[1];
        index = 2;
    }
    append(line, &at, "{\"bpm\":");
    append_unsigned(line, &at, bpm);
    if (flags & 0x08) {
        if (index + 2 > count) goto short_value;
        append(line, &at, ",\"energyExpended\":");
        append_unsigned(line, &at, (unsigned)bytes[index] | (unsigned)bytes[index + 1] << 8);
        index += 2;
    }
    append(line, &at, ",\"event\":\"heartRate\"");
    if ((flags & 0x10) && index < count) {
        if ((count - index) % 2 != 0) return emit_error("unreadable measurement: RR intervals of an odd length"), 0;
        append(line, &at, ",\"rrIntervals\":[");
        for (int first = 1; index < count; index += 2, first = 0) {
            if (!first) line[at++] = ',';
            append_rr_seconds(line, &at, (unsigned)bytes[index] | (unsigned)bytes[index + 1] << 8);
        }
        line[at++] = ']';
    }
    append(line, &at, "}\n");
    bench_write_line(line, at);
    return 1;
short_value: {
    char message[96];
    snprintf(message, sizeof message, "unreadable measurement: a heart rate measurement of %d bytes is cut short",
             count);
    emit_error(message);
    return 0;
}
}

/* --- D-Bus helpers ----------------------------------------------------------------------- */

/* A method call to bluetoothd with its reply (or an exit with an error line). The arguments
 * are dbus_message_append_args's, DBUS_TYPE_INVALID last. */
static DBusMessage *call(const char *path, const char *interface, const char *method, int first_type, ...) {
    DBusMessage *message = dbus_message_new_method_call(BLUEZ, path, interface, method);
    if (!message) fail("out of memory", NULL);
    va_list arguments;
    va_start(arguments, first_type);
    dbus_bool_t ok = dbus_message_append_args_valist(message, first_type, arguments);
    va_end(arguments);
    if (!ok) fail("out of memory", NULL);
    DBusError error;
    dbus_error_init(&error);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(bus, message, CALL_TIMEOUT_MS, &error);
    dbus_message_unref(message);
    if (!reply) {
        char what[200];
        snprintf(what, sizeof what, "%s.%s on %s", interface, method, path);
        fail(what, &error);
    }
    return reply;
}

static void add_match(const char *rule) {
    DBusError error;
    dbus_error_init(&error);
    dbus_bus_add_match(bus, rule, &error);
    if (dbus_error_is_set(&error)) fail("AddMatch", &error);
}

static void remove_match(const char *rule) {
    DBusError error;
    dbus_error_init(&error);
    dbus_bus_remove_match(bus, rule, &error);
    if (dbus_error_is_set(&error)) fail("RemoveMatch", &error);
}

/* In an a{sv} at `dict`: the variant of `key`'s entry in `value` (TRUE), or FALSE. */
static int find_entry(DBusMessageIter dict, const char *key, DBusMessageIter *value) {
    for (; dbus_message_iter_get_arg_type(&dict) == DBUS_TYPE_DICT_ENTRY; dbus_message_iter_next(&dict)) {
        DBusMessageIter entry;
        const char *name = NULL;
        dbus_message_iter_recurse(&dict, &entry);
        if (dbus_message_iter_get_arg_type(&entry) != DBUS_TYPE_STRING) continue;
        dbus_message_iter_get_basic(&entry, &name);
        if (strcmp(name, key) != 0) continue;
        dbus_message_iter_next(&entry);
        if (dbus_message_iter_get_arg_type(&entry) != DBUS_TYPE_VARIANT) return 0;
        dbus_message_iter_recurse(&entry, value);
        return 1;
    }
    return 0;
}

/* The string or object path of `key` in an a{sv} (NULL when absent or of another type). */
static const char *string_entry(DBusMessageIter dict, const char *key) {
    DBusMessageIter value;
    const char *text = NULL;
    if (!find_entry(dict, key, &value)) return NULL;
    int type = dbus_message_iter_get_arg_type(&value);
    if (type != DBUS_TYPE_STRING && type != DBUS_TYPE_OBJECT_PATH) return NULL;
    dbus_message_iter_get_basic(&value, &text);
    return text;
}

/* The boolean `key` of an a{sv}: 1 or 0, -1 when absent. */
static int bool_entry(DBusMessageIter dict, const char *key) {
    DBusMessageIter value;
    dbus_bool_t flag = FALSE;
    if (!find_entry(dict, key, &value) || dbus_message_iter_get_arg_type(&value) != DBUS_TYPE_BOOLEAN) return -1;
    dbus_message_iter_get_basic(&value, &flag);
    return flag ? 1 : 0;
}

/* In an a{sa{sv}} (one object's interfaces) at `interfaces`: `name`'s properties. */
static int find_interface(DBusMessageIter interfaces, const char *name, DBusMessageIter *properties) {
    for (; dbus_message_iter_get_arg_type(&interfaces) == DBUS_TYPE_DICT_ENTRY;
         dbus_message_iter_next(&interfaces)) {
        DBusMessageIter entry;
        const char *interface = NULL;
        dbus_message_iter_recurse(&interfaces, &entry);
        dbus_message_iter_get_basic(&entry, &interface);
        if (strcmp(interface, name) != 0) continue;
        dbus_message_iter_next(&entry);
        dbus_message_iter_recurse(&entry, properties);
        return 1;
    }
    return 0;
}

/* --- Finding the device and its characteristic ------------------------------------------ */

struct device {
    char path[256];
    char address[32];
    int rssi;        /* 127 when bluetoothd has none (Core Bluetooth's "unavailable") */
    int connected;   /* -1: unknown */
};

static const char *adapter_path;
static const char *wanted_name;

/* Takes a Device1's properties when they are the wanted device's (on our adapter, named so). */
static int consider_device(const char *path, DBusMessageIter properties, struct device *device) {
    const char *name = string_entry(properties, "Name");
    const char *adapter = string_entry(properties, "Adapter");
    if (!name || strcmp(name, wanted_name) != 0) return 0;
    if (adapter ? strcmp(adapter, adapter_path) != 0 : strncmp(path, adapter_path, strlen(adapter_path)) != 0)
        return 0;
    snprintf(device->path, sizeof device->path, "%s", path);
    const char *address = string_entry(properties, "Address");
    snprintf(device->address, sizeof device->address, "%s", address ? address : "");
    DBusMessageIter value;
    device->rssi = 127;
    if (find_entry(properties, "RSSI", &value) && dbus_message_iter_get_arg_type(&value) == DBUS_TYPE_INT16) {
        dbus_int16_t rssi;
        dbus_message_iter_get_basic(&value, &rssi);
        device->rssi = rssi;
    }
    device->connected = bool_entry(properties, "Connected");
    return 1;
}

/* Walks GetManagedObjects' reply: `visit` gets each object path and its interfaces (a{sa{sv}});
 * stops at the first for which it returns TRUE (and returns TRUE). */
static int each_object(DBusMessage *reply, int (*visit)(const char *, DBusMessageIter, void *), void *context) {
    DBusMessageIter iter, objects;
    if (!dbus_message_iter_init(reply, &iter) || dbus_message_iter_get_arg_type(&iter) != DBUS_TYPE_ARRAY) return 0;
    dbus_message_iter_recurse(&iter, &objects);
    for (; dbus_message_iter_get_arg_type(&objects) == DBUS_TYPE_DICT_ENTRY; dbus_message_iter_next(&objects)) {
        DBusMessageIter entry, interfaces;
        const char *path = NULL;
        dbus_message_iter_recurse(&objects, &entry);
        dbus_message_iter_get_basic(&entry, &path);
        dbus_message_iter_next(&entry);
        dbus_message_iter_recurse(&entry, &interfaces);
        if (visit(path, interfaces, context)) return 1;
    }
    return 0;
}

static int visit_device(const char *path, DBusMessageIter interfaces, void *context) {
    DBusMessageIter properties;
    return find_interface(interfaces, DEVICE_INTERFACE, &properties) && consider_device(path, properties, context);
}

struct characteristic_search {
    const char *device_path;
    char path[256];
};

static int visit_characteristic(const char *path, DBusMessageIter interfaces, void *context) {
    struct characteristic_search *search = context;
    size_t length = strlen(search->device_path);
    if (strncmp(path, search->device_path, length) != 0 || path[length] != '/') return 0;
    DBusMessageIter properties;
    if (!find_interface(interfaces, "org.bluez.GattCharacteristic1", &properties)) return 0;
    const char *uuid = string_entry(properties, "UUID");
    if (!uuid || strcmp(uuid, MEASUREMENT_UUID) != 0) return 0;
    snprintf(search->path, sizeof search->path, "%s", path);
    return 1;
}

static DBusMessage *managed_objects(void) {
    return call("/", OBJECT_MANAGER, "GetManagedObjects", DBUS_TYPE_INVALID);
}

/* A signal of the set-up (under the set-up's match rule) that shows the wanted device. */
static int signal_shows_device(DBusMessage *message, struct device *device) {
    DBusMessageIter iter, properties;
    const char *path = NULL;
    if (dbus_message_is_signal(message, OBJECT_MANAGER, "InterfacesAdded")) {
        if (!dbus_message_iter_init(message, &iter) || dbus_message_iter_get_arg_type(&iter) != DBUS_TYPE_OBJECT_PATH)
            return 0;
        dbus_message_iter_get_basic(&iter, &path);
        dbus_message_iter_next(&iter);
        DBusMessageIter interfaces;
        dbus_message_iter_recurse(&iter, &interfaces);
        return find_interface(interfaces, DEVICE_INTERFACE, &properties) && consider_device(path, properties, device);
    }
    if (dbus_message_is_signal(message, BENCH_PROPERTIES_INTERFACE, BENCH_PROPERTIES_CHANGED) &&
        dbus_message_has_signature(message, "sa{sv}as")) {
        const char *interface = NULL;
        dbus_message_iter_init(message, &iter);
        dbus_message_iter_get_basic(&iter, &interface);
        if (strcmp(interface, DEVICE_INTERFACE) != 0) return 0;
        dbus_message_iter_next(&iter);
        dbus_message_iter_recurse(&iter, &properties);
        const char *name = string_entry(properties, "Name");
        if (!name || strcmp(name, wanted_name) != 0) return 0;
        /* A name that came later: the rest of the device's properties from bluetoothd. */
        DBusMessage *reply = managed_objects();
        int found = each_object(reply, visit_device, device);
        dbus_message_unref(reply);
        return found && strcmp(device->path, dbus_message_get_path(message)) == 0;
    }
    return 0;
}

static double now_s(void) { return bench_now_us() / 1e6; }

/* Waits for the device by name: among the known objects, else discovering. */
static void find_device(struct device *device, double timeout_s) {
    DBusMessage *reply = managed_objects();
    int found = each_object(reply, visit_device, device);
    dbus_message_unref(reply);
    if (found) return;
    /* Not known: discover, LE only, as heart-rate-central's scan. */
    DBusMessage *message = dbus_message_new_method_call(BLUEZ, adapter_path, ADAPTER_INTERFACE, "SetDiscoveryFilter");
    DBusMessageIter iter, dict, entry, variant;
    const char *key = "Transport", *transport = "le";
    dbus_message_iter_init_append(message, &iter);
    dbus_bool_t ok = dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "{sv}", &dict);
    ok = ok && dbus_message_iter_open_container(&dict, DBUS_TYPE_DICT_ENTRY, NULL, &entry);
    ok = ok && dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &key);
    ok = ok && dbus_message_iter_open_container(&entry, DBUS_TYPE_VARIANT, "s", &variant);
    ok = ok && dbus_message_iter_append_basic(&variant, DBUS_TYPE_STRING, &transport);
    ok = ok && dbus_message_iter_close_container(&entry, &variant);
    ok = ok && dbus_message_iter_close_container(&dict, &entry);
    ok = ok && dbus_message_iter_close_container(&iter, &dict);
    if (!ok) fail("out of memory", NULL);
    DBusError error;
    dbus_error_init(&error);
    DBusMessage *answer = dbus_connection_send_with_reply_and_block(bus, message, CALL_TIMEOUT_MS, &error);
    dbus_message_unref(message);
    if (!answer) fail("SetDiscoveryFilter", &error);
    dbus_message_unref(answer);
    dbus_message_unref(call(adapter_path, ADAPTER_INTERFACE, "StartDiscovery", DBUS_TYPE_INVALID));
    double deadline = now_s() + timeout_s;
    found = 0;
    while (!found && now_s() < deadline) {
        if (!dbus_connection_read_write(bus, 500)) fail("the bus connection closed", NULL);
        DBusMessage *signal;
        while (!found && (signal = dbus_connection_pop_message(bus)) != NULL) {
            found = signal_shows_device(signal, device);
            dbus_message_unref(signal);
        }
    }
    /* Stopping may fail when discovery already ended; that does not matter. */
    message = dbus_message_new_method_call(BLUEZ, adapter_path, ADAPTER_INTERFACE, "StopDiscovery");
    answer = dbus_connection_send_with_reply_and_block(bus, message, CALL_TIMEOUT_MS, &error);
    dbus_message_unref(message);
    if (answer) dbus_message_unref(answer);
    dbus_error_free(&error);
    if (!found) {
        char what[300];
        snprintf(what, sizeof what, "%s not found on %s", wanted_name, adapter_path + strlen("/org/bluez/"));
        fail(what, NULL);
    }
}

/* The device's boolean property `name` (Properties.Get). */
static int device_flag(const char *path, const char *name) {
    const char *interface = DEVICE_INTERFACE;
    DBusMessage *reply = call(path, BENCH_PROPERTIES_INTERFACE, "Get", DBUS_TYPE_STRING, &interface,
                              DBUS_TYPE_STRING, &name, DBUS_TYPE_INVALID);
    DBusMessageIter iter, variant;
    dbus_bool_t flag = FALSE;
    dbus_message_iter_init(reply, &iter);
    dbus_message_iter_recurse(&iter, &variant);
    if (dbus_message_iter_get_arg_type(&variant) == DBUS_TYPE_BOOLEAN) dbus_message_iter_get_basic(&variant, &flag);
    dbus_message_unref(reply);
    return flag ? 1 : 0;
}

/* Waits until `ready` is true, reading (and dropping) the set-up's signals meanwhile, for at
 * most `seconds`; FALSE when it never was. */
static int wait_for(int (*ready)(const char *), const char *argument, double seconds) {
    double deadline = now_s() + seconds;
    while (!ready(argument)) {
        if (now_s() > deadline) return 0;
        if (!dbus_connection_read_write(bus, 200)) fail("the bus connection closed", NULL);
        DBusMessage *signal;
        while ((signal = dbus_connection_pop_message(bus)) != NULL) dbus_message_unref(signal);
    }
    return 1;
}

static int services_resolved(const char *path) { return device_flag(path, "ServicesResolved"); }

static char measurement_path[256];

static int measurement_found(const char *device_path) {
    struct characteristic_search search = {.device_path = device_path};
    DBusMessage *reply = managed_objects();
    int found = each_object(reply, visit_characteristic, &search);
    dbus_message_unref(reply);
    if (found) memcpy(measurement_path, search.path, sizeof measurement_path);
    return found;
}

/* --- main --------------------------------------------------------------------------------- */

/* The Value bytes of PropertiesChanged("org.bluez.GattCharacteristic1", {..., "Value": <ay>,
 * ...}, [...]); FALSE for any other signal or shape. */
static int value_bytes(DBusMessage *message, const unsigned char **bytes, int *count) {
    if (!dbus_message_has_signature(message, "sa{sv}as")) return 0;
    DBusMessageIter iter, dict, variant, array;
    const char *interface = NULL;
    dbus_message_iter_init(message, &iter);
    dbus_message_iter_get_basic(&iter, &interface);
    if (strcmp(interface, "org.bluez.GattCharacteristic1") != 0) return 0;
    dbus_message_iter_next(&iter);
    dbus_message_iter_recurse(&iter, &dict);
    if (!find_entry(dict, "Value", &variant) || dbus_message_iter_get_arg_type(&variant) != DBUS_TYPE_ARRAY ||
        dbus_message_iter_get_element_type(&variant) != DBUS_TYPE_BYTE)
        return 0;
    dbus_message_iter_recurse(&variant, &array);
    dbus_message_iter_get_fixed_array(&array, bytes, count);
    return 1;
}

int main(int argc, char **argv) {
    const char *adapter = "hci0", *device_argument = NULL;
    unsigned long count = 0;
    double timeout_s = 60;
    wanted_name = "BlueZKit Bench";
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--adapter") == 0) {
            adapter = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--name") == 0) {
            wanted_name = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--device") == 0) {
            device_argument = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--count") == 0) {
            count = bench_count_argument(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--timeout") == 0) {
            timeout_s = (double)bench_count_argument(argv[++i]);
        } else {
            fprintf(stderr,
                    "usage: %s [--adapter hciN] [--name NAME | --device PATH] [--count N] [--timeout S]\n",
                    argv[0]);
            return 2;
        }
    }
    static char adapter_buffer[64];
    snprintf(adapter_buffer, sizeof adapter_buffer, "/org/bluez/%s", adapter);
    adapter_path = adapter_buffer;

    DBusError error;
    dbus_error_init(&error);
    bus = dbus_bus_get_private(DBUS_BUS_SYSTEM, &error);
    if (!bus) fail("cannot connect to the system bus", &error);
    dbus_connection_set_exit_on_disconnect(bus, FALSE);

    /* The set-up's signals: every one of bluetoothd's under the adapter, and its objects. */
    char setup_rule[256];
    snprintf(setup_rule, sizeof setup_rule, "type='signal',sender='" BLUEZ "',path_namespace='%s'", adapter_path);
    const char *objects_rule =
        "type='signal',sender='" BLUEZ "',interface='" OBJECT_MANAGER "',member='InterfacesAdded'";
    add_match(setup_rule);
    add_match(objects_rule);

    struct device device = {.rssi = 127, .connected = -1};
    if (device_argument) {
        snprintf(device.path, sizeof device.path, "%s", device_argument);
    } else {
        find_device(&device, timeout_s);
    }
    {
        /* heart-rate-central's line, printed just before it asks to connect. */
        char line[512];
        size_t at = 0;
        append(line, &at, "{\"event\":\"discovered\",\"id\":");
        append_quoted(line, &at, 200, device.address[0] ? device.address : device.path);
        append(line, &at, ",\"name\":");
        append_quoted(line, &at, 400, wanted_name);
        at += (size_t)snprintf(line + at, sizeof line - at, ",\"rssi\":%d}\n", device.rssi);
        bench_write_line(line, at);
    }
    if (device.connected != 1 && !device_flag(device.path, "Connected"))
        dbus_message_unref(call(device.path, DEVICE_INTERFACE, "Connect", DBUS_TYPE_INVALID));
    {
        char line[320];
        size_t at = 0;
        append(line, &at, "{\"event\":\"connected\",\"id\":");
        append_quoted(line, &at, 300, device.address[0] ? device.address : device.path);
        append(line, &at, "}\n");
        bench_write_line(line, at);
    }
    if (!wait_for(services_resolved, device.path, 60)) fail("services not resolved in 60 s", NULL);
    if (!wait_for(measurement_found, device.path, 30)) fail("the sensor has no Heart Rate Measurement characteristic", NULL);

    /* From here on, only the characteristic's PropertiesChanged and the device's. */
    char value_rule[512], device_rule[512];
    snprintf(value_rule, sizeof value_rule,
             "type='signal',sender='" BLUEZ "',path='%s',interface='" BENCH_PROPERTIES_INTERFACE
             "',member='" BENCH_PROPERTIES_CHANGED "',arg0='org.bluez.GattCharacteristic1'",
             measurement_path);
    snprintf(device_rule, sizeof device_rule,
             "type='signal',sender='" BLUEZ "',path='%s',interface='" BENCH_PROPERTIES_INTERFACE
             "',member='" BENCH_PROPERTIES_CHANGED "',arg0='" DEVICE_INTERFACE "'",
             device.path);
    add_match(value_rule);
    add_match(device_rule);
    remove_match(setup_rule);
    remove_match(objects_rule);
    {
        DBusMessage *signal;
        while ((signal = dbus_connection_pop_message(bus)) != NULL) dbus_message_unref(signal);
    }
    dbus_message_unref(call(measurement_path, "org.bluez.GattCharacteristic1", "StartNotify", DBUS_TYPE_INVALID));

    unsigned long readings = 0;
    while (count == 0 || readings < count) {
        if (!dbus_connection_read_write(bus, -1)) fail("the bus connection closed", NULL);
        DBusMessage *message;
        while ((message = dbus_connection_pop_message(bus)) != NULL) {
            if (dbus_message_is_signal(message, BENCH_PROPERTIES_INTERFACE, BENCH_PROPERTIES_CHANGED)) {
                const char *path = dbus_message_get_path(message);
                const unsigned char *bytes = NULL;
                int length = 0;
                if (path && strcmp(path, measurement_path) == 0) {
                    if (value_bytes(message, &bytes, &length) && emit_reading(bytes, length)) readings++;
                } else if (path && strcmp(path, device.path) == 0 && dbus_message_has_signature(message, "sa{sv}as")) {
                    DBusMessageIter iter, dict;
                    dbus_message_iter_init(message, &iter);
                    dbus_message_iter_next(&iter);
                    dbus_message_iter_recurse(&iter, &dict);
                    if (bool_entry(dict, "Connected") == 0) {
                        char message_text[96];
                        snprintf(message_text, sizeof message_text, "disconnected after %lu readings", readings);
                        fail(message_text, NULL);
                    }
                }
            }
            dbus_message_unref(message);
            if (count != 0 && readings >= count) break;
        }
    }
    /* As heart-rate-central's stop: disconnect, then exit. */
    dbus_message_unref(call(device.path, DEVICE_INTERFACE, "Disconnect", DBUS_TYPE_INVALID));
    dbus_connection_close(bus);
    dbus_connection_unref(bus);
    return 0;
}
