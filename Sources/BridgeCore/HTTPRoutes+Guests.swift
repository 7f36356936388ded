import Foundation

/// `/api/v1/guests` (README, "Guests"), and what a guest's token may reach on the other routes.
extension HTTPRoutes {
    func guestsRoute(_ request: HTTPRequest, method: String, path: [String], user: User) -> HTTPResponse {
        guard let guests else { return HTTPRoutes.notFound }
        do {
            switch (path.count, method) {
            case (1, "GET"):
                let list = try guests.list(user.id)
                return HTTPRoutes.json(.object([("guests", .array(list.map { $0.guest.json(token: $0.token) }))]))
            case (1, "POST"):
                switch GuestDraft.parse(request.body, user: user, now: now()) {
                case .failure(let problem):
                    return HTTPRoutes.error(400, problem.message)
                case .success(let draft):
                    switch try guests.create(user.id, draft) {
                    case .tooMany:
                        return HTTPRoutes.error(409, "At most \(Guest.maxPerUser) guests at once; revoke one first")
                    case .created(let guest, let token):
                        return HTTPRoutes.json(guest.json(token: token), status: 201)
                    }
                }
            case (1, _):
                return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD, POST")
            case (2, "DELETE"):
                return try guests.revoke(user.id, path[1]) ? HTTPResponse(status: 204) : HTTPRoutes.notFound
            default:
                return HTTPRoutes.methodNotAllowed(allow: "DELETE")
            }
        } catch {
            return failed(request, error)
        }
    }

    /// The user as the session sees it: a guest only its rooms; `nil` when the user is gone.
    static func visibleUser(_ session: SessionServices.Session, in home: Home) -> User? {
        guard let user = home.user(id: session.userID) else { return nil }
        return session.guest.map { $0.view(of: user) } ?? user
    }

    /// The room `name` (an id or a name, as `User.room(named:)` finds it) among the rooms the token
    /// sees. Routes act on the room this returns, by its id: finding the name again in the user's
    /// full list could give a guest another room, one whose id is the name the guest's room has.
    static func visibleRoom(_ session: SessionServices.Session, named name: String, in home: Home) -> Room? {
        // The owner's own token sees every room: found in place, without the copy a view makes.
        guard session.guest != nil else { return home.room(ofUser: session.userID, named: name) }
        return visibleUser(session, in: home)?.room(named: name)
    }

    /// 403 for a guest's token on a route that is the user's own: changing rooms, alarms, watchdogs, groups, guests,
    /// logging out everywhere.
    static func ownersOnly(_ session: SessionServices.Session) -> HTTPResponse? {
        session.guest == nil ? nil : error(403, "A guest's token cannot do this; only its rooms can be read"
            + " (and their lights switched, with control access)")
    }
}
