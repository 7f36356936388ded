import BridgeCore
import CMicroHTTPD

// libmicrohttpd's callbacks. They are plain C function pointers (no captured context): the dispatcher arrives
// through `cls` and the per-request state through `*con_cls`, both as Unmanaged pointers.

/// `MHD_AccessHandlerCallback`: called once when headers are complete, once per body chunk, and once when the
/// request is complete; only the last call may run the handler.
func mhdAccessHandler(
    cls: UnsafeMutableRawPointer?,
    connection: OpaquePointer?,
    url: UnsafePointer<CChar>?,
    method: UnsafePointer<CChar>?,
    version: UnsafePointer<CChar>?,
    uploadData: UnsafePointer<CChar>?,
    uploadDataSize: UnsafeMutablePointer<Int>?,
    requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
) -> MHD_Result {
    guard let cls, let connection, let url, let method, let uploadDataSize, let requestContext else { return .NO }
    // Borrowed, not retained: the daemon holds the dispatcher for as long as it runs, and a retain per call
    // would be an atomic write to the one object every server thread reads (docs/performance.md, "Fewer
    // shared locks").
    return Unmanaged<RequestDispatcher>.fromOpaque(cls)._withUnsafeGuaranteedRef { dispatcher in
        access(dispatcher, MHDConnection(pointer: connection), url: url, method: method, uploadData: uploadData,
               uploadDataSize: uploadDataSize, requestContext: requestContext)
    }
}

/// `mhdAccessHandler` once its pointers are checked.
private func access(
    _ dispatcher: RequestDispatcher,
    _ mhdConnection: MHDConnection,
    url: UnsafePointer<CChar>,
    method: UnsafePointer<CChar>,
    uploadData: UnsafePointer<CChar>?,
    uploadDataSize: UnsafeMutablePointer<Int>,
    requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>
) -> MHD_Result {
    guard var existing = requestContext.pointee else {
        // No body yet: most requests have none, so the body's buffer is made only when data arrives.
        requestContext.pointee = PendingRequest.none
        mhdConnection.context?.head.headCompleted()
        return dispatcher.headersReceived(on: mhdConnection)
    }
    if uploadDataSize.pointee > 0 {
        if existing == PendingRequest.none {
            // Released by mhdRequestCompleted, which MHD calls for every request that reached this handler.
            existing = Unmanaged.passRetained(PendingRequest()).toOpaque()
            requestContext.pointee = existing
        }
        Unmanaged<PendingRequest>.fromOpaque(existing).takeUnretainedValue()
            .append(UnsafeRawBufferPointer(start: uploadData, count: uploadDataSize.pointee), limit: dispatcher.maxBodyBytes)
        uploadDataSize.pointee = 0
        return .YES
    }
    let pending = existing == PendingRequest.none ? PendingRequest.empty
        : Unmanaged<PendingRequest>.fromOpaque(existing).takeUnretainedValue()
    return dispatcher.requestCompleted(
        on: mhdConnection, method: String(cString: method), path: String(cString: url), pending: pending)
}

/// `MHD_RequestCompletedCallback`: frees the per-request state however the request ended.
func mhdRequestCompleted(
    cls: UnsafeMutableRawPointer?,
    connection: OpaquePointer?,
    requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    reason: MHD_RequestTerminationCode
) {
    if let connection {
        MHDConnection(pointer: connection).context?.head.requestFinished(at: HeadClock.now())
    }
    guard let requestContext, let pending = requestContext.pointee else { return }
    if pending != PendingRequest.none { Unmanaged<PendingRequest>.fromOpaque(pending).release() }
    requestContext.pointee = nil
}

/// `MHD_NotifyConnectionCallback`: a connection opened or closed; `ConnectionGuard` decides which stay.
func mhdConnectionNotified(
    cls: UnsafeMutableRawPointer?,
    connection: OpaquePointer?,
    socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    code: MHD_ConnectionNotificationCode
) {
    guard let cls, let connection else { return }
    let dispatcher = Unmanaged<RequestDispatcher>.fromOpaque(cls).takeUnretainedValue()
    let id = UInt(bitPattern: connection)
    // MHD_CONNECTION_NOTIFY_STARTED; Swift imports the enum without named cases.
    if code.rawValue == 0 {
        let host = CMicroHTTPD_connection_client_address(connection).flatMap(SocketAddressText.host(of:)) ?? ""
        let head = HeadClock(startedAt: HeadClock.now())
        // Formatted once per connection rather than per request; released below.
        socketContext?.pointee = Unmanaged.passRetained(ConnectionContext(clientAddress: host, head: head)).toOpaque()
        // Counted as the login throttle counts: an IPv4 address, or an IPv6 /64.
        dispatcher.connections.started(id, address: host.isEmpty ? "" : ClientAddress.throttleKey(host),
                                       socket: CMicroHTTPD_connection_socket(connection), head: head)
    } else {
        dispatcher.connections.closed(id)
        dispatcher.connectionClosed(id)
        if let context = socketContext?.pointee {
            Unmanaged<ConnectionContext>.fromOpaque(context).release()
            socketContext?.pointee = nil
        }
    }
}
