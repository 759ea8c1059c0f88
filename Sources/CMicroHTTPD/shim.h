// A typed wrapper over libmicrohttpd's variadic MHD_start_daemon, which
// Swift cannot call. The listener (AdminListener.swift) keeps the logic.
#ifndef MEDIAFS_CMICROHTTPD_SHIM_H
#define MEDIAFS_CMICROHTTPD_SHIM_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

/// MHD_start_daemon on a socket already bound and listening (mediafs binds
/// it before mounting, so a busy address fails the command), served by
/// one internal thread polling with poll(2); each connection bounded in
/// idle time and memory, and the connections at once in number.
static inline struct MHD_Daemon *mediafs_mhd_start(int listen_fd, unsigned int connection_limit,
                                                   unsigned int per_ip_limit, unsigned int idle_seconds,
                                                   size_t memory_limit, MHD_AccessHandlerCallback handler,
                                                   void *cls) {
    return MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC, 0, NULL, NULL,
                            handler, cls,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listen_fd,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, idle_seconds,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
                            MHD_OPTION_END);
}
/// libmicrohttpd's closed enums come to Swift as enums whose case names
/// depend on the importer's prefix rules; these name the two values used.
static inline enum MHD_Result mediafs_mhd_no(void) { return MHD_NO; }
static inline enum MHD_ResponseMemoryMode mediafs_mhd_must_copy(void) { return MHD_RESPMEM_MUST_COPY; }
#endif
