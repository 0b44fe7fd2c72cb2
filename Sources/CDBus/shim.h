/* The one header of the CDBus module: libdbus-1 (and epoll, below), plus re-exports of the
 * macros Swift cannot import because they are casts. Logic never goes here. */
#ifndef CDBUS_SHIM_H
#define CDBUS_SHIM_H

#include <dbus/dbus.h>

/* epoll(7), which Swift's Glibc module leaves out: a D-Bus connection's two reading threads
 * wait with EPOLLEXCLUSIVE (DescriptorReadiness+ReaderPair.swift). */
#include <sys/epoll.h>

static const uint32_t CDBUS_EPOLLIN = EPOLLIN;
static const uint32_t CDBUS_EPOLLEXCLUSIVE = EPOLLEXCLUSIVE;
static const int CDBUS_EPOLL_CTL_ADD = EPOLL_CTL_ADD;
static const int CDBUS_EPOLL_CTL_DEL = EPOLL_CTL_DEL;
static const int CDBUS_EPOLL_CLOEXEC = EPOLL_CLOEXEC;

static const int CDBUS_TYPE_INVALID = DBUS_TYPE_INVALID;
static const int CDBUS_TYPE_BYTE = DBUS_TYPE_BYTE;
static const int CDBUS_TYPE_BOOLEAN = DBUS_TYPE_BOOLEAN;
static const int CDBUS_TYPE_INT16 = DBUS_TYPE_INT16;
static const int CDBUS_TYPE_UINT16 = DBUS_TYPE_UINT16;
static const int CDBUS_TYPE_INT32 = DBUS_TYPE_INT32;
static const int CDBUS_TYPE_UINT32 = DBUS_TYPE_UINT32;
static const int CDBUS_TYPE_INT64 = DBUS_TYPE_INT64;
static const int CDBUS_TYPE_UINT64 = DBUS_TYPE_UINT64;
static const int CDBUS_TYPE_DOUBLE = DBUS_TYPE_DOUBLE;
static const int CDBUS_TYPE_STRING = DBUS_TYPE_STRING;
static const int CDBUS_TYPE_OBJECT_PATH = DBUS_TYPE_OBJECT_PATH;
static const int CDBUS_TYPE_SIGNATURE = DBUS_TYPE_SIGNATURE;
static const int CDBUS_TYPE_UNIX_FD = DBUS_TYPE_UNIX_FD;
static const int CDBUS_TYPE_ARRAY = DBUS_TYPE_ARRAY;
static const int CDBUS_TYPE_VARIANT = DBUS_TYPE_VARIANT;
static const int CDBUS_TYPE_STRUCT = DBUS_TYPE_STRUCT;
static const int CDBUS_TYPE_DICT_ENTRY = DBUS_TYPE_DICT_ENTRY;

static const int CDBUS_TIMEOUT_INFINITE = DBUS_TIMEOUT_INFINITE;
static const int CDBUS_TIMEOUT_USE_DEFAULT = DBUS_TIMEOUT_USE_DEFAULT;

static const int CDBUS_MESSAGE_TYPE_INVALID = DBUS_MESSAGE_TYPE_INVALID;
static const int CDBUS_MESSAGE_TYPE_METHOD_CALL = DBUS_MESSAGE_TYPE_METHOD_CALL;
static const int CDBUS_MESSAGE_TYPE_METHOD_RETURN = DBUS_MESSAGE_TYPE_METHOD_RETURN;
static const int CDBUS_MESSAGE_TYPE_ERROR = DBUS_MESSAGE_TYPE_ERROR;
static const int CDBUS_MESSAGE_TYPE_SIGNAL = DBUS_MESSAGE_TYPE_SIGNAL;

static const int CDBUS_MAXIMUM_ARRAY_LENGTH = DBUS_MAXIMUM_ARRAY_LENGTH;
static const int CDBUS_MAXIMUM_TYPE_RECURSION_DEPTH = DBUS_MAXIMUM_TYPE_RECURSION_DEPTH;

#endif
