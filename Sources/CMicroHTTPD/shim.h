// A typed wrapper over libmicrohttpd's variadic MHD_start_daemon, which
// Swift cannot call. The listener (AdminListener.swift) keeps the logic.
#ifndef MEDIAFS_CMICROHTTPD_SHIM_H
#define MEDIAFS_CMICROHTTPD_SHIM_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <string.h>
#include <microhttpd.h>

/// MHD_start_daemon on a socket already bound and listening (mediafs binds
/// it before mounting, so a busy address fails the command), served by
/// one internal thread polling with poll(2); each connection bounded in
/// idle time and memory, and the connections at once in number.
static inline struct MHD_Daemon *mediafs_mhd_start(int listen_fd, unsigned int connection_limit,
                                                   unsigned int per_ip_limit, unsigned int idle_seconds,
                                                   size_t memory_limit, MHD_AccessHandlerCallback handler,
                                                   MHD_RequestCompletedCallback completed, void *cls) {
    return MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC, 0, NULL, NULL,
                            handler, cls,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listen_fd,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, idle_seconds,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, cls,
                            MHD_OPTION_END);
}

/// A request header's value, or NULL.
static inline const char *mediafs_mhd_header(struct MHD_Connection *connection, const char *name) {
    return MHD_lookup_connection_value(connection, MHD_HEADER_KIND, name);
}

struct mediafs_mhd_arguments_buffer { char *at; size_t left; int overflow; };

static enum MHD_Result mediafs_mhd_argument(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    struct mediafs_mhd_arguments_buffer *buffer = cls;
    size_t key_length = strlen(key), value_length = value ? strlen(value) : 0;
    if (key_length + value_length + 2 > buffer->left) {
        buffer->overflow = 1;
        return MHD_NO;
    }
    memcpy(buffer->at, key, key_length + 1);
    buffer->at += key_length + 1;
    if (value) memcpy(buffer->at, value, value_length);
    buffer->at[value_length] = 0;
    buffer->at += value_length + 1;
    buffer->left -= key_length + value_length + 2;
    return MHD_YES;
}

/// The query's arguments, decoded, as "key\0value\0…" into `out` (at most
/// `capacity` bytes): their length, or -1 when they do not fit.
static inline long mediafs_mhd_arguments(struct MHD_Connection *connection, char *out, size_t capacity) {
    struct mediafs_mhd_arguments_buffer buffer = { out, capacity, 0 };
    MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, mediafs_mhd_argument, &buffer);
    return buffer.overflow ? -1 : (long)(capacity - buffer.left);
}
/// libmicrohttpd's closed enums come to Swift as enums whose case names
/// depend on the importer's prefix rules; these name the two values used.
static inline enum MHD_Result mediafs_mhd_no(void) { return MHD_NO; }
static inline enum MHD_Result mediafs_mhd_yes(void) { return MHD_YES; }
static inline enum MHD_ResponseMemoryMode mediafs_mhd_must_copy(void) { return MHD_RESPMEM_MUST_COPY; }
#endif
