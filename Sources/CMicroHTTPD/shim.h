#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <microhttpd.h>

/*
 * Swift cannot call C variadic functions, so the few variadic libmicrohttpd entry points that BridgeHTTP
 * needs are wrapped here with a fixed parameter list. Keep these wrappers free of policy: every decision
 * (flags, limits, sockets) is made on the Swift side.
 */

/*
 * Starts a daemon on an already bound and listening socket (MHD_OPTION_LISTEN_SOCKET), which lets the
 * caller control the exact address and family. The port argument of MHD_start_daemon is ignored by MHD
 * when a listen socket is given, hence 0.
 * Each option is passed with the exact C type MHD reads from the va_list (unsigned int, size_t, ...).
 */
static inline struct MHD_Daemon *CMicroHTTPD_start_daemon(
    unsigned int flags,
    MHD_socket listen_socket,
    MHD_AccessHandlerCallback access_handler,
    void *access_handler_cls,
    MHD_RequestCompletedCallback completed_handler,
    void *completed_handler_cls,
    MHD_NotifyConnectionCallback connection_handler,
    void *connection_handler_cls,
    size_t (*unescape_handler)(void *cls, struct MHD_Connection *connection, char *text),
    void *unescape_handler_cls,
    unsigned int thread_pool_size,
    unsigned int connection_limit,
    unsigned int per_ip_connection_limit,
    unsigned int connection_timeout_seconds,
    size_t connection_memory_limit,
    const char *tls_key_pem,
    const char *tls_cert_pem)
{
    /* TLS options through MHD_OPTION_ARRAY, so one call serves both: without a key the array is empty. */
    struct MHD_OptionItem tls[] = {
        { tls_key_pem != NULL ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, (void *) tls_key_pem },
        { MHD_OPTION_HTTPS_MEM_CERT, 0, (void *) tls_cert_pem },
        { MHD_OPTION_END, 0, NULL },
    };
    return MHD_start_daemon(
        flags, 0, NULL, NULL, access_handler, access_handler_cls,
        MHD_OPTION_LISTEN_SOCKET, listen_socket,
        MHD_OPTION_NOTIFY_COMPLETED, completed_handler, completed_handler_cls,
        MHD_OPTION_NOTIFY_CONNECTION, connection_handler, connection_handler_cls,
        MHD_OPTION_UNESCAPE_CALLBACK, unescape_handler, unescape_handler_cls,
        MHD_OPTION_THREAD_POOL_SIZE, thread_pool_size,
        MHD_OPTION_CONNECTION_LIMIT, connection_limit,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_connection_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout_seconds,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, connection_memory_limit,
        MHD_OPTION_ARRAY, tls,
        MHD_OPTION_END);
}

/* Whether this libmicrohttpd was built with TLS (GnuTLS); MHD_is_feature_supported takes an enum. */
static inline int CMicroHTTPD_supports_tls(void)
{
    return MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES;
}

/* The peer address of a connection, or NULL when MHD cannot tell (MHD_get_connection_info is variadic). */
static inline const struct sockaddr *CMicroHTTPD_connection_client_address(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info == NULL ? NULL : info->client_addr;
}

/* What the connection-notify callback stored in the connection's socket context, or NULL. */
static inline void *CMicroHTTPD_connection_socket_context(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info == NULL ? NULL : info->socket_context;
}

/* Size in bytes of the request line plus headers as received, or 0 when MHD cannot tell. */
static inline size_t CMicroHTTPD_connection_request_header_size(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    return info == NULL ? 0 : info->header_size;
}

/* The socket of a connection, or -1 when MHD cannot tell (MHD_get_connection_info is variadic). */
static inline int CMicroHTTPD_connection_socket(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}
