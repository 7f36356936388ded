/// API sessions as the routes see them; the runtime backs them with the database.
public struct SessionServices: Sendable {
    /// A live session: whose it is, what a revocation names, and when it ends.
    public struct Session: Sendable, Equatable {
        public var userID: String
        /// `SessionClaims.idText`: what event streams are filed under, so revoking the session ends them.
        public var id: String
        /// Unix seconds; the session is dead from this second on, and its event streams end then.
        public var expiresAt: Int64
        /// For a guest's token (README, "Guests"): the guest, whose rooms and access bound what it
        /// sees and does; `nil` for the user's own token.
        public var guest: Guest?

        public init(userID: String, id: String, expiresAt: Int64, guest: Guest? = nil) {
            self.userID = userID
            self.id = id
            self.expiresAt = expiresAt
            self.guest = guest
        }
    }

    /// Starts a session for a user; returns the token to hand to the client.
    public var create: @Sendable (_ userID: String) throws -> String
    /// The session of a token, `nil` for an unknown, expired or revoked one.
    public var resolve: @Sendable (_ token: String) throws -> Session?
    public var revoke: @Sendable (_ token: String) throws -> Void
    /// Ends every session of a user ("log out everywhere").
    public var revokeAll: @Sendable (_ userID: String) throws -> Void

    public init(
        create: @escaping @Sendable (String) throws -> String,
        resolve: @escaping @Sendable (String) throws -> Session?,
        revoke: @escaping @Sendable (String) throws -> Void,
        revokeAll: @escaping @Sendable (String) throws -> Void = { _ in }
    ) {
        self.create = create
        self.resolve = resolve
        self.revoke = revoke
        self.revokeAll = revokeAll
    }
}

/// What opening a user's live event stream (`GET /api/v1/events`) came to.
public enum EventStreamOpening: Sendable {
    /// A place is held for the stream; the route hands this to the server, which calls it with the sink once
    /// the answer's head is queued. If the server never calls it (client gone, no stream slot), dropping it
    /// frees the place.
    case accepted(@Sendable (any HTTPStreamSink) -> Void)
    /// Too many streams already (per token or per user): answered 429 with this message.
    case refused(String)
}

/// Opens a user's live event stream for a session; the runtime registers it with whatever publishes state
/// changes and events, under the session so that logging out, or the session's expiry, ends it too.
public typealias EventStreamOpener = @Sendable (_ session: SessionServices.Session) -> EventStreamOpening
