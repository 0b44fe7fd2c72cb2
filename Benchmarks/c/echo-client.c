/* echo-client [--send] ADDRESS N [DESTINATION] — N sequential Echo(ay of 20 bytes) round
 * trips (dbus_connection_send_with_reply_and_block) after a warm-up of 200,
 * checking every reply. Prints "roundtrip_us X" (mean wall-clock time of one
 * round trip). DESTINATION defaults to org.bluezkit.Benchmark.EchoC.
 *
 * With --send, no libdbus pending call: the call goes out with dbus_connection_send and
 * the client reads until the message answering its serial (dbus_connection_read_write,
 * dbus_connection_pop_message), as BlueZKit's D-Bus layer matches its replies itself.
 * libdbus's pending call builds the error it would give on a timeout for every call; this
 * variant shows what raw libdbus costs without that, for comparison. */
#include "bench-common.h"

#define WARM_UP 200

/* Sends `call` and reads until its reply (dropping anything else); returns the reply. */
static DBusMessage *send_and_read_reply(DBusConnection *connection, DBusMessage *call) {
    dbus_uint32_t serial = 0;
    if (!dbus_connection_send(connection, call, &serial)) bench_die("cannot send", NULL);
    for (;;) {
        DBusMessage *message;
        while ((message = dbus_connection_pop_message(connection)) != NULL) {
            if (dbus_message_get_reply_serial(message) == serial) return message;
            dbus_message_unref(message);
        }
        if (!dbus_connection_read_write(connection, -1)) bench_die("the connection closed", NULL);
    }
}

static int send_only = 0;

static void roundtrip(DBusConnection *connection, const char *destination, unsigned long index) {
    unsigned char bytes[BENCH_VALUE_LENGTH];
    const unsigned char *pointer = bytes;
    bench_value(index, bytes);
    DBusMessage *call =
        dbus_message_new_method_call(destination, BENCH_ECHO_PATH, BENCH_ECHO_INTERFACE, BENCH_ECHO_METHOD);
    if (!call || !dbus_message_append_args(call, DBUS_TYPE_ARRAY, DBUS_TYPE_BYTE, &pointer, BENCH_VALUE_LENGTH,
                                           DBUS_TYPE_INVALID))
        bench_die("out of memory", NULL);
    DBusError error;
    dbus_error_init(&error);
    DBusMessage *reply = send_only
                             ? send_and_read_reply(connection, call)
                             : dbus_connection_send_with_reply_and_block(connection, call, DBUS_TIMEOUT_USE_DEFAULT, &error);
    dbus_message_unref(call);
    if (!reply) bench_die("Echo failed", &error);
    if (send_only && dbus_set_error_from_message(&error, reply)) bench_die("Echo failed", &error);
    const unsigned char *echoed = NULL;
    int count = 0;
    if (!dbus_message_get_args(reply, &error, DBUS_TYPE_ARRAY, DBUS_TYPE_BYTE, &echoed, &count, DBUS_TYPE_INVALID))
        bench_die("unexpected reply", &error);
    if (count != BENCH_VALUE_LENGTH || memcmp(echoed, bytes, BENCH_VALUE_LENGTH) != 0)
        bench_die("the reply does not echo the call", NULL);
    dbus_message_unref(reply);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--send") == 0) {
        send_only = 1;
        argv++;
        argc--;
    }
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s [--send] ADDRESS N [DESTINATION]\n", argv[0]);
        return 2;
    }
    unsigned long count = bench_count_argument(argv[2]);
    const char *destination = argc == 4 ? argv[3] : BENCH_ECHO_NAME_C;
    DBusConnection *connection = bench_connect(argv[1]);
    for (unsigned long i = 0; i < WARM_UP; i++) roundtrip(connection, destination, i);
    double start = bench_now_us();
    for (unsigned long i = 0; i < count; i++) roundtrip(connection, destination, i);
    double elapsed = bench_now_us() - start;
    printf("roundtrip_us %.3f\n", elapsed / (double)count);
    return 0;
}
