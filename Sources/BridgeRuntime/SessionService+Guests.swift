import BridgeCore
import BridgeCrypto
import BridgeStorage
import Foundation

/// Guests (README, "Guests"): tokens signed like the user's own, marked as a guest's and named by
/// the guest's id, good only while that guest is in `guests` (and so in the database) and unexpired.
extension SessionService {
    /// The session of a guest's token, `nil` once the guest is gone, expired, or its user changed.
    func guestSession(_ claims: SessionClaims) -> SessionServices.Session? {
        guard let guest = guests.withLock({ $0[claims.idText] }), guest.userID == claims.userID,
              guest.expiresAt == claims.expiresAt, claims.binding == guestBinding(guest) else { return nil }
        return SessionServices.Session(userID: guest.userID, id: guest.id, expiresAt: guest.expiresAt, guest: guest)
    }

    /// Ties a guest's token to its guest and to the account's id and username, but not to the
    /// password: a password change leaves the guests the user handed out working.
    private func guestBinding(_ guest: Guest) -> [UInt8] {
        let parts = ["guest v1", guest.id, guest.userID, accounts.withLock { $0[guest.userID]?.username } ?? ""]
        return signer.digest(Array(parts.joined(separator: "\u{0}").utf8), count: SessionClaims.bindingBytes)
    }

    /// The token of a guest. Signing is deterministic, so this is the token handed out at creation.
    private func token(of guest: Guest) -> String {
        guard let id = Self.bytes(hex: guest.id), id.count == SessionClaims.idBytes else { return "" }
        let claims = SessionClaims(id: id, userID: guest.userID, expiresAt: guest.expiresAt,
                                   binding: guestBinding(guest), isGuest: true)
        return signer.sign(claims.payload)
    }

    /// Stores a new guest, unless the user has `Guest.maxPerUser` unexpired ones. The count, the row and
    /// the entry are made under the guests' lock, so parallel requests can't exceed the bound.
    func createGuest(userID: String, _ draft: GuestDraft) throws -> GuestServices.Creation {
        let seconds = Int64(now().timeIntervalSince1970)
        let guest = Guest(id: SessionClaims.hex(SessionToken.randomBytes(SessionClaims.idBytes)), userID: userID,
                          rooms: draft.rooms, access: draft.access, expiresAt: draft.expiresAt)
        let created = try guests.withLock { (all: inout [String: Guest]) throws(StorageError) -> Bool in
            // Expired guests go from memory and the database here, so neither grows between restarts.
            all = all.filter { $0.value.expiresAt > seconds }
            try guestStore.purgeExpired(now: seconds)
            guard all.values.count(where: { $0.userID == userID }) < Guest.maxPerUser else { return false }
            try guestStore.add(guest, createdAt: seconds)
            all[guest.id] = guest
            return true
        }
        guard created else { return .tooMany }
        logger.info("guest created", ["user": userID, "guest": guest.id, "access": guest.access.rawValue,
                                      "rooms": guest.rooms.joined(separator: ",")])
        return .created(guest, token: token(of: guest))
    }

    /// The user's unexpired guests, soonest to expire first, each with its token.
    func guestList(userID: String) -> [(guest: Guest, token: String)] {
        let seconds = Int64(now().timeIntervalSince1970)
        return guests.withLock { all in all.values.filter { $0.userID == userID && $0.expiresAt > seconds } }
            .sorted { ($0.expiresAt, $0.id) < ($1.expiresAt, $1.id) }
            .map { ($0, token(of: $0)) }
    }

    /// Deletes a guest of the user: from the database first (so a 204 survives a crash), then from
    /// memory; records its token as revoked and ends its streams.
    func revokeGuest(userID: String, id: String) throws -> Bool {
        let removed = try guests.withLock { (all: inout [String: Guest]) throws(StorageError) -> Guest? in
            guard let guest = all[id], guest.userID == userID else { return nil }
            _ = try guestStore.delete(id: id, userID: userID)
            all[id] = nil
            return guest
        }
        guard let removed else { return false }
        try record(SessionRevocation(id: removed.id, expiresAt: removed.expiresAt))
        logger.info("guest revoked", ["user": userID, "guest": id])
        return true
    }

    /// Deletes every guest of the user (logged out everywhere).
    func revokeAllGuests(userID: String) throws {
        let removed = try guests.withLock { (all: inout [String: Guest]) throws(StorageError) -> [Guest] in
            let mine = all.values.filter { $0.userID == userID }
            guard !mine.isEmpty else { return [] }
            try guestStore.deleteAll(userID: userID)
            for guest in mine { all[guest.id] = nil }
            return mine
        }
        for guest in removed { try record(SessionRevocation(id: guest.id, expiresAt: guest.expiresAt)) }
    }
}
