/* echo-server ADDRESS — owns org.bluezkit.Benchmark.EchoC and answers
 * org.bluezkit.Benchmark.Echo(ay) with the same bytes, in a
 * dbus_connection_read_write_dispatch loop. Quit() makes it exit.
 * Prints "ready" once it owns the name. */
#include "bench-common.h"

static int quit = 0;

static DBusHandlerResult handle(DBusConnection *connection, DBusMessage *message, void *data) {
    (void)data;
    if (dbus_message_is_method_call(message, BENCH_ECHO_INTERFACE, BENCH_QUIT_METHOD)) {
        quit = 1;
        DBusMessage *reply = dbus_message_new_method_return(message);
        dbus_connection_send(connection, reply, NULL);
        dbus_message_unref(reply);
        return DBUS_HANDLER_RESULT_HANDLED;
    }
    if (!dbus_message_is_method_call(message, BENCH_ECHO_INTERFACE, BENCH_ECHO_METHOD))
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    DBusMessage *reply;
    DBusMessageIter iter, array;
    if (!dbus_message_has_signature(message, "ay") || !dbus_message_iter_init(message, &iter)) {
        reply = dbus_message_new_error(message, DBUS_ERROR_INVALID_ARGS, "expected ay");
    } else {
        const unsigned char *bytes = NULL;
        int count = 0;
        dbus_message_iter_recurse(&iter, &array);
        dbus_message_iter_get_fixed_array(&array, &bytes, &count);
        reply = dbus_message_new_method_return(message);
        if (!reply || !dbus_message_append_args(reply, DBUS_TYPE_ARRAY, DBUS_TYPE_BYTE, &bytes, count,
                                                DBUS_TYPE_INVALID))
            bench_die("out of memory", NULL);
    }
    if (!dbus_connection_send(connection, reply, NULL)) bench_die("send failed", NULL);
    dbus_message_unref(reply);
    return DBUS_HANDLER_RESULT_HANDLED;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s ADDRESS\n", argv[0]);
        return 2;
    }
    DBusConnection *connection = bench_connect(argv[1]);
    DBusError error;
    dbus_error_init(&error);
    static const DBusObjectPathVTable vtable = {.message_function = handle};
    if (!dbus_connection_register_object_path(connection, BENCH_ECHO_PATH, &vtable, NULL))
        bench_die("cannot register the object", NULL);
    int owned = dbus_bus_request_name(connection, BENCH_ECHO_NAME_C, DBUS_NAME_FLAG_DO_NOT_QUEUE, &error);
    if (owned != DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER) bench_die("cannot own " BENCH_ECHO_NAME_C, &error);
    printf("ready\n");
    fflush(stdout);
    while (!quit && dbus_connection_read_write_dispatch(connection, -1)) {
    }
    dbus_connection_flush(connection);
    return 0;
}
