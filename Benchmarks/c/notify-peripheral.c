/* notify-peripheral [--adapter hciN] [--name NAME] [--interval-ms N]
 *
 * The C floor of the peripheral side (Scripts/guest/e2e-benchmark.py's phase 4, side "c"): what
 * heart-rate-peripheral --json does for a central subscribed through StartNotify (every value
 * a PropertiesChanged signal to bluetoothd), with libdbus alone and nothing more.
 *
 * On the system bus (or DBUS_SYSTEM_BUS_ADDRESS's): exports a GATT application — an
 * ObjectManager at its root, the Heart Rate service (0x180D, primary) with the Heart Rate
 * Measurement characteristic (0x2A37, Flags ["notify"], as heart-rate-peripheral's
 * MutableCharacteristic(properties: [.notify], permissions: []) has them) — and an
 * advertisement (peripheral, LocalName NAME (default "BlueZKit Bench"), ServiceUUIDs 0x180D),
 * registers both on the adapter (default hci1: GattManager1.RegisterApplication,
 * LEAdvertisingManager1.RegisterAdvertisement) and prints
 *
 *     {"event":"advertising","name":NAME}
 *
 * On StartNotify of the measurement it prints {"characteristic":"2A37","event":"subscribed"}
 * and then, every --interval-ms (default 20, an absolute schedule) until StopNotify, makes the
 * next measurement as heart-rate-peripheral's HeartRateModel does (a slow wave with noise from
 * SplitMix64, sensor contact, one RR interval, energy expended every tenth one), encodes it
 * as HeartRateMeasurement.encoded() does, emits PropertiesChanged("org.bluez.GattCharacteristic1",
 * {"Value": <ay>}, []) on the characteristic and writes heart-rate-peripheral's line for it,
 * byte for byte, with one write(2):
 *
 *     {"bpm":78,"centrals":1,"event":"notified"}
 *
 * Runs until it is killed (SIGTERM: bluetoothd drops the application and the advertisement
 * with the bus name); exits 1 when the bus connection closes or a registration fails. */
#define _POSIX_C_SOURCE 200809L

#include "bench-common.h"

#include <errno.h>
#include <math.h>
#include <unistd.h>

#define BLUEZ "org.bluez"
#define OBJECT_MANAGER "org.freedesktop.DBus.ObjectManager"
#define SERVICE_INTERFACE "org.bluez.GattService1"
#define CHARACTERISTIC_INTERFACE "org.bluez.GattCharacteristic1"
#define ADVERTISEMENT_INTERFACE "org.bluez.LEAdvertisement1"
#define ROOT_PATH "/org/bluezkit/floor"
#define SERVICE_PATH ROOT_PATH "/service0"
#define CHARACTERISTIC_PATH SERVICE_PATH "/char0"
#define ADVERTISEMENT_PATH ROOT_PATH "/advertisement0"
#define SERVICE_UUID "0000180d-0000-1000-8000-00805f9b34fb"
#define MEASUREMENT_UUID "00002a37-0000-1000-8000-00805f9b34fb"

static DBusConnection *bus;
static const char *local_name = "BlueZKit Bench";
static char adapter_path[64];

/* --- Output ------------------------------------------------------------------------------ */

static void fail(const char *what, const char *detail) {
    char line[512];
    int length = snprintf(line, sizeof line, "{\"event\":\"error\",\"message\":\"%s%s%s\"}\n", what,
                          detail ? ": " : "", detail ? detail : "");
    /* The messages here are bluetoothd's error names and texts: no quotes to escape in them. */
    if (length > 0) bench_write_line(line, (size_t)length < sizeof line ? (size_t)length : sizeof line - 1);
    exit(1);
}

/* --- The measurement --------------------------------------------------------------------- */

static uint64_t random_state;

/* SplitMix64 (Steele, Lea and Flood), as HeartRateModel's generator. */
static uint64_t next_random(void) {
    random_state += 0x9E3779B97F4A7C15ULL;
    uint64_t z = random_state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static unsigned long measurement_count;
static double energy_joules;

/* The next measurement's value (`*length` bytes) and its rate, `seconds` after the last one. */
static unsigned next_measurement(double seconds, unsigned char *value, int *length) {
    measurement_count++;
    double wave = 12 * sin((double)measurement_count / 20);
    double noise = -2 + 4 * ((double)(next_random() >> 11) / 9007199254740992.0); /* in [-2, 2) */
    double rate = 78 + wave + noise;
    unsigned bpm = (unsigned)round(rate < 45 ? 45 : rate > 190 ? 190 : rate);
    energy_joules += seconds * ((double)bpm * 1.4);
    unsigned rr = (unsigned)round(60.0 / bpm * 1024);
    int at = 0;
    value[at++] = 0x06 | 0x10; /* sensor contact detected, RR intervals */
    value[at++] = (unsigned char)bpm; /* 45 ... 190: one byte */
    if (measurement_count % 10 == 0) {
        double kilojoules = energy_joules / 1000;
        unsigned energy = kilojoules > 65535 ? 65535u : (unsigned)kilojoules;
        value[0] |= 0x08;
        value[at++] = (unsigned char)(energy & 0xFF);
        value[at++] = (unsigned char)(energy >> 8);
    }
    value[at++] = (unsigned char)(rr & 0xFF);
    value[at++] = (unsigned char)(rr >> 8);
    *length = at;
    return bpm;
}

/* --- The exported objects ---------------------------------------------------------------- */

static int append_entry(DBusMessageIter *dict, const char *key, int type, const char *signature, const void *value) {
    DBusMessageIter entry, variant;
    return dbus_message_iter_open_container(dict, DBUS_TYPE_DICT_ENTRY, NULL, &entry) &&
           dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &key) &&
           dbus_message_iter_open_container(&entry, DBUS_TYPE_VARIANT, signature, &variant) &&
           dbus_message_iter_append_basic(&variant, type, value) &&
           dbus_message_iter_close_container(&entry, &variant) && dbus_message_iter_close_container(dict, &entry);
}

/* An entry whose value is an array of one basic value (as, ao). */
static int append_array_entry(DBusMessageIter *dict, const char *key, int type, const char *signature,
                              const void *value) {
    DBusMessageIter entry, variant, array;
    int ok = dbus_message_iter_open_container(dict, DBUS_TYPE_DICT_ENTRY, NULL, &entry) &&
             dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &key) &&
             dbus_message_iter_open_container(&entry, DBUS_TYPE_VARIANT, signature, &variant) &&
             dbus_message_iter_open_container(&variant, DBUS_TYPE_ARRAY, signature + 1, &array);
    if (ok && value) ok = dbus_message_iter_append_basic(&array, type, value);
    return ok && dbus_message_iter_close_container(&variant, &array) &&
           dbus_message_iter_close_container(&entry, &variant) && dbus_message_iter_close_container(dict, &entry);
}

/* The a{sv} of `path`'s one interface (appended to `iter`); FALSE for an unknown object. */
static int append_properties(DBusMessageIter *iter, const char *path) {
    DBusMessageIter dict;
    int ok = dbus_message_iter_open_container(iter, DBUS_TYPE_ARRAY, "{sv}", &dict);
    if (strcmp(path, SERVICE_PATH) == 0) {
        const char *uuid = SERVICE_UUID, *characteristic = CHARACTERISTIC_PATH;
        dbus_bool_t primary = TRUE;
        ok = ok && append_entry(&dict, "UUID", DBUS_TYPE_STRING, "s", &uuid) &&
             append_entry(&dict, "Primary", DBUS_TYPE_BOOLEAN, "b", &primary) &&
             append_array_entry(&dict, "Characteristics", DBUS_TYPE_OBJECT_PATH, "ao", &characteristic);
    } else if (strcmp(path, CHARACTERISTIC_PATH) == 0) {
        const char *uuid = MEASUREMENT_UUID, *service = SERVICE_PATH, *flag = "notify";
        ok = ok && append_entry(&dict, "UUID", DBUS_TYPE_STRING, "s", &uuid) &&
             append_entry(&dict, "Service", DBUS_TYPE_OBJECT_PATH, "o", &service) &&
             append_array_entry(&dict, "Flags", DBUS_TYPE_STRING, "as", &flag) &&
             append_array_entry(&dict, "Descriptors", DBUS_TYPE_OBJECT_PATH, "ao", NULL);
    } else if (strcmp(path, ADVERTISEMENT_PATH) == 0) {
        const char *type = "peripheral", *uuid = SERVICE_UUID;
        ok = ok && append_entry(&dict, "Type", DBUS_TYPE_STRING, "s", &type) &&
             append_array_entry(&dict, "ServiceUUIDs", DBUS_TYPE_STRING, "as", &uuid) &&
             append_entry(&dict, "LocalName", DBUS_TYPE_STRING, "s", &local_name);
    } else {
        return 0;
    }
    if (!(ok && dbus_message_iter_close_container(iter, &dict))) fail("out of memory", NULL);
    return 1;
}

static const char *interface_of(const char *path) {
    if (strcmp(path, SERVICE_PATH) == 0) return SERVICE_INTERFACE;
    if (strcmp(path, CHARACTERISTIC_PATH) == 0) return CHARACTERISTIC_INTERFACE;
    if (strcmp(path, ADVERTISEMENT_PATH) == 0) return ADVERTISEMENT_INTERFACE;
    return NULL;
}

/* GetManagedObjects at the root: the service and its characteristic. */
static DBusMessage *managed_objects(DBusMessage *call) {
    static const char *const paths[] = {SERVICE_PATH, CHARACTERISTIC_PATH};
    DBusMessage *reply = dbus_message_new_method_return(call);
    DBusMessageIter iter, objects, object, interfaces, interface;
    int ok = reply != NULL;
    if (ok) dbus_message_iter_init_append(reply, &iter);
    ok = ok && dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "{oa{sa{sv}}}", &objects);
    for (size_t i = 0; ok && i < sizeof paths / sizeof paths[0]; i++) {
        const char *path = paths[i], *name = interface_of(paths[i]);
        ok = dbus_message_iter_open_container(&objects, DBUS_TYPE_DICT_ENTRY, NULL, &object) &&
             dbus_message_iter_append_basic(&object, DBUS_TYPE_OBJECT_PATH, &path) &&
             dbus_message_iter_open_container(&object, DBUS_TYPE_ARRAY, "{sa{sv}}", &interfaces) &&
             dbus_message_iter_open_container(&interfaces, DBUS_TYPE_DICT_ENTRY, NULL, &interface) &&
             dbus_message_iter_append_basic(&interface, DBUS_TYPE_STRING, &name) &&
             append_properties(&interface, path) && dbus_message_iter_close_container(&interfaces, &interface) &&
             dbus_message_iter_close_container(&object, &interfaces) &&
             dbus_message_iter_close_container(&objects, &object);
    }
    ok = ok && dbus_message_iter_close_container(&iter, &objects);
    if (!ok) fail("out of memory", NULL);
    return reply;
}

/* --- Notifying ---------------------------------------------------------------------------- */

static int notifying;
static double interval_s = 0.02;
static double next_tick_us;

static void tick(void) {
    unsigned char value[8];
    int length = 0;
    unsigned bpm = next_measurement(interval_s, value, &length);
    DBusMessage *signal = bench_value_signal(value, length);
    if (!dbus_message_set_path(signal, CHARACTERISTIC_PATH) || !dbus_connection_send(bus, signal, NULL))
        fail("out of memory", NULL);
    dbus_message_unref(signal);
    char line[64];
    int count = snprintf(line, sizeof line, "{\"bpm\":%u,\"centrals\":1,\"event\":\"notified\"}\n", bpm);
    bench_write_line(line, (size_t)count);
}

static DBusHandlerResult handle(DBusConnection *connection, DBusMessage *message, void *data) {
    (void)data;
    if (dbus_message_get_type(message) != DBUS_MESSAGE_TYPE_METHOD_CALL) return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    const char *path = dbus_message_get_path(message), *interface = dbus_message_get_interface(message);
    const char *member = dbus_message_get_member(message);
    if (!path || !member) return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    if (!interface) interface = "";
    DBusMessage *reply = NULL;
    if (strcmp(path, ROOT_PATH) == 0 && strcmp(interface, OBJECT_MANAGER) == 0 &&
        strcmp(member, "GetManagedObjects") == 0) {
        reply = managed_objects(message);
    } else if (strcmp(interface, BENCH_PROPERTIES_INTERFACE) == 0 && interface_of(path) &&
               (strcmp(member, "GetAll") == 0 || strcmp(member, "Get") == 0)) {
        /* Get answers with the whole a{sv}'s entry for the name: bluetoothd asks with GetAll. */
        const char *asked = NULL;
        if (!dbus_message_get_args(message, NULL, DBUS_TYPE_STRING, &asked, DBUS_TYPE_INVALID) ||
            strcmp(asked, interface_of(path)) != 0) {
            reply = dbus_message_new_error(message, DBUS_ERROR_INVALID_ARGS, "no such interface");
        } else if (strcmp(member, "Get") == 0) {
            reply = dbus_message_new_error(message, DBUS_ERROR_NOT_SUPPORTED, "use GetAll");
        } else {
            DBusMessageIter iter;
            reply = dbus_message_new_method_return(message);
            if (reply) {
                dbus_message_iter_init_append(reply, &iter);
                append_properties(&iter, path);
            }
        }
    } else if (strcmp(path, CHARACTERISTIC_PATH) == 0 && strcmp(interface, CHARACTERISTIC_INTERFACE) == 0) {
        if (strcmp(member, "StartNotify") == 0) {
            reply = dbus_message_new_method_return(message);
            if (!notifying) {
                static const char line[] = "{\"characteristic\":\"2A37\",\"event\":\"subscribed\"}\n";
                bench_write_line(line, sizeof line - 1);
                notifying = 1;
                next_tick_us = bench_now_us() + interval_s * 1e6;
            }
        } else if (strcmp(member, "StopNotify") == 0) {
            reply = dbus_message_new_method_return(message);
            if (notifying) {
                static const char line[] = "{\"characteristic\":\"2A37\",\"event\":\"unsubscribed\"}\n";
                bench_write_line(line, sizeof line - 1);
                notifying = 0;
            }
        } else {
            reply = dbus_message_new_error(message, "org.bluez.Error.NotSupported", "notify only");
        }
    } else if (strcmp(path, ADVERTISEMENT_PATH) == 0 && strcmp(interface, ADVERTISEMENT_INTERFACE) == 0 &&
               strcmp(member, "Release") == 0) {
        reply = dbus_message_new_method_return(message);
    } else {
        reply = dbus_message_new_error(message, DBUS_ERROR_UNKNOWN_METHOD, "no such method");
    }
    if (!reply || !dbus_connection_send(connection, reply, NULL)) fail("out of memory", NULL);
    dbus_message_unref(reply);
    return DBUS_HANDLER_RESULT_HANDLED;
}

/* --- Registration ------------------------------------------------------------------------- */

static void register_advertisement(void);

/* An asynchronous call to the adapter with (o PATH, a{sv} {}): bluetoothd calls back into this
 * process before it answers, so the main loop must keep dispatching meanwhile. */
static void call_register(const char *interface, const char *method, const char *path,
                          DBusPendingCallNotifyFunction done) {
    DBusMessage *message = dbus_message_new_method_call(BLUEZ, adapter_path, interface, method);
    DBusMessageIter iter, options;
    DBusPendingCall *pending = NULL;
    int ok = message != NULL;
    if (ok) dbus_message_iter_init_append(message, &iter);
    ok = ok && dbus_message_iter_append_basic(&iter, DBUS_TYPE_OBJECT_PATH, &path) &&
         dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "{sv}", &options) &&
         dbus_message_iter_close_container(&iter, &options) &&
         dbus_connection_send_with_reply(bus, message, &pending, 60000) && pending &&
         dbus_pending_call_set_notify(pending, done, NULL, NULL);
    if (!ok) fail("out of memory", NULL);
    dbus_message_unref(message);
    dbus_pending_call_unref(pending);
}

/* The reply of a registration, or an exit with its error. */
static void check_reply(DBusPendingCall *pending, const char *what) {
    DBusMessage *reply = dbus_pending_call_steal_reply(pending);
    if (!reply) fail(what, "no reply");
    if (dbus_message_get_type(reply) == DBUS_MESSAGE_TYPE_ERROR) {
        DBusError error;
        dbus_error_init(&error);
        dbus_set_error_from_message(&error, reply);
        fail(what, error.message ? error.message : dbus_message_get_error_name(reply));
    }
    dbus_message_unref(reply);
}

static void advertisement_registered(DBusPendingCall *pending, void *data) {
    (void)data;
    check_reply(pending, "RegisterAdvertisement");
    char line[256];
    int length = snprintf(line, sizeof line, "{\"event\":\"advertising\",\"name\":\"%s\"}\n", local_name);
    bench_write_line(line, (size_t)length < sizeof line ? (size_t)length : sizeof line - 1);
}

static void application_registered(DBusPendingCall *pending, void *data) {
    (void)data;
    check_reply(pending, "RegisterApplication");
    register_advertisement();
}

static void register_advertisement(void) {
    call_register("org.bluez.LEAdvertisingManager1", "RegisterAdvertisement", ADVERTISEMENT_PATH,
                  advertisement_registered);
}

/* --- main --------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    const char *adapter = "hci1";
    unsigned long interval_ms = 20;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--adapter") == 0) {
            adapter = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--name") == 0) {
            local_name = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--interval-ms") == 0) {
            interval_ms = bench_count_argument(argv[++i]);
        } else if (strcmp(argv[i], "--json") == 0) {
            /* heart-rate-peripheral's flag: the lines here are always its JSON ones. */
        } else {
            fprintf(stderr, "usage: %s [--adapter hciN] [--name NAME] [--interval-ms N]\n", argv[0]);
            return 2;
        }
    }
    if (strlen(local_name) > 100 || strpbrk(local_name, "\"\\")) {
        fprintf(stderr, "a name of at most 100 characters without quotes or backslashes, please\n");
        return 2;
    }
    snprintf(adapter_path, sizeof adapter_path, "/org/bluez/%s", adapter);
    interval_s = (double)interval_ms / 1000;
    random_state = (uint64_t)bench_now_us() ^ ((uint64_t)getpid() << 32);

    DBusError error;
    dbus_error_init(&error);
    bus = dbus_bus_get_private(DBUS_BUS_SYSTEM, &error);
    if (!bus) fail("cannot connect to the system bus", error.message);
    dbus_connection_set_exit_on_disconnect(bus, FALSE);
    static const DBusObjectPathVTable table = {.message_function = handle};
    if (!dbus_connection_register_fallback(bus, ROOT_PATH, &table, NULL)) fail("out of memory", NULL);
    call_register("org.bluez.GattManager1", "RegisterApplication", ROOT_PATH, application_registered);

    for (;;) {
        int timeout_ms = -1;
        if (notifying) {
            double wait_us = next_tick_us - bench_now_us();
            timeout_ms = wait_us <= 0 ? 0 : (int)ceil(wait_us / 1000);
        }
        if (!dbus_connection_read_write(bus, timeout_ms)) fail("the bus connection closed", NULL);
        while (dbus_connection_dispatch(bus) == DBUS_DISPATCH_DATA_REMAINS) {
        }
        if (notifying && bench_now_us() >= next_tick_us) {
            tick();
            /* The next deadline on the schedule; after a stall, the next one still ahead. */
            double now = bench_now_us(), step = interval_s * 1e6;
            next_tick_us += step;
            if (next_tick_us <= now) next_tick_us += step * ceil((now - next_tick_us) / step);
        }
    }
}
