/// What a connection keeps for all of its requests, in MHD's per-connection socket context: made when the
/// connection-notify callback reports its start, released when it reports its end.
///
/// Immutable but for its head clock, whose own atomic makes it safe to share, so any of MHD's threads may read it.
final class ConnectionContext: Sendable {
    /// The client's address as text (`SocketAddressText.host`), formatted once instead of on every request.
    let clientAddress: String
    /// Where the connection's request head stands, for the head deadline (`ConnectionGuard`).
    let head: HeadClock

    init(clientAddress: String, head: HeadClock) {
        self.clientAddress = clientAddress
        self.head = head
    }
}
