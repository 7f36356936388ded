/// What a connection keeps for all of its requests, in MHD's per-connection socket context: made when the
/// connection-notify callback reports its start, released when it reports its end.
///
/// Immutable, so any of MHD's threads may read it (`Sendable` for that reason, not shared state).
final class ConnectionContext: Sendable {
    /// The client's address as text (`SocketAddressText.host`), formatted once instead of on every request.
    let clientAddress: String

    init(clientAddress: String) {
        self.clientAddress = clientAddress
    }
}
