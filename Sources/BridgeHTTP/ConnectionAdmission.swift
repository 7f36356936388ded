/// Which connections the server keeps, as a value-type state machine with the clock passed in, so every rule
/// is tested without sockets (README "HTTP", section "Connection limits"; docs/security.md, "Slowloris").
///
/// The rules, checked when a connection arrives and by a periodic sweep:
/// - **Head deadline.** A request head (request line and headers) must be complete within `headTimeout` seconds
///   of the connection opening, or of the previous response on a kept-alive connection. The deadline is for the
///   whole head, not per byte, so a client trickling one byte at a time gains nothing.
/// - **Per address.** One client (an IPv4 address; an IPv6 /64, which one machine usually holds whole) holds at
///   most `maxPerAddress` connections.
/// - **Reserve.** The last `reserved` slots go only to clients holding fewer than `reservedPerAddress`
///   connections, so a few busy addresses can never take every slot.
/// - **Full.** When every slot is taken, a newcomer displaces the oldest unfinished head of the client holding
///   the most connections, if that client holds more than the newcomer would; otherwise the newcomer is refused.
struct ConnectionAdmission: Sendable {
    struct Limits: Sendable {
        var maxConnections: Int
        var maxPerAddress: Int
        var headTimeout: Double

        /// An eighth of all slots, at least one.
        var reserved: Int { max(1, maxConnections / 8) }
        /// A browser opens up to six connections to one host; four get a page loaded.
        var reservedPerAddress: Int { 4 }
    }

    /// What the caller must do.
    enum Decision: Equatable, Sendable {
        case admit
        /// Refuse the newcomer (close it at once).
        case refuse
        /// Admit the newcomer and close this other connection to make room.
        case admitDisplacing(UInt)
    }

    private struct Entry: Sendable {
        var address: String
        /// When the head now being awaited started: the connection's start or the end of its last request.
        var headStarted: Double
        var headComplete = false
        /// Already chosen for closing; no longer counts, and is not chosen again.
        var closing = false
    }

    let limits: Limits
    private var entries: [UInt: Entry] = [:]
    private var perAddress: [String: Int] = [:]
    /// Connections that count (not closing).
    private(set) var count = 0

    init(limits: Limits) {
        self.limits = limits
    }

    /// How many live connections a client address key holds.
    func connections(of address: String) -> Int { perAddress[address] ?? 0 }

    /// A connection arrived from `address` (a key from `ClientAddress.throttleKey`).
    mutating func connectionStarted(_ id: UInt, address: String, now: Double) -> Decision {
        let held = connections(of: address)
        let free = limits.maxConnections - count
        var decision = Decision.admit
        if held >= limits.maxPerAddress {
            decision = .refuse
        } else if free <= 0 {
            decision = victim(for: held + 1).map(Decision.admitDisplacing) ?? .refuse
        } else if free <= limits.reserved && held >= limits.reservedPerAddress {
            decision = .refuse
        }
        if decision == .refuse {
            // Tracked as closing so that its close callback finds it, but never counted.
            entries[id] = Entry(address: address, headStarted: now, closing: true)
            return .refuse
        }
        if case .admitDisplacing(let displaced) = decision { markClosing(displaced) }
        entries[id] = Entry(address: address, headStarted: now)
        perAddress[address, default: 0] += 1
        count += 1
        return decision
    }

    /// Where a connection's head now stands, as the connection keeps it (`HeadClock`): when the head
    /// now awaited started (the connection's start, or the end of its last request on a kept-alive
    /// one) and whether it is complete, which takes it out of the head deadline until its request ends.
    mutating func observeHead(_ id: UInt, startedAt started: Double, complete: Bool) {
        // Read, change, write back, and only on a change: the optional-chained `entries[id]?.x = y` goes
        // through Dictionary's unspecialised modify accessor, which allocated three times per call
        // (docs/performance.md, "The HTTP cost, profiled").
        guard var entry = entries[id], entry.headStarted != started || entry.headComplete != complete else { return }
        entry.headStarted = started
        entry.headComplete = complete
        entries[id] = entry
    }

    /// The server closed the connection (for whatever reason).
    mutating func connectionClosed(_ id: UInt) {
        guard let entry = entries.removeValue(forKey: id) else { return }
        if !entry.closing { release(entry.address) }
    }

    /// Connections whose head deadline has passed, now marked as closing; the caller closes them.
    mutating func expired(now: Double) -> [UInt] {
        let late = entries.filter { !$0.value.closing && !$0.value.headComplete
            && now - $0.value.headStarted >= limits.headTimeout }.map(\.key)
        for id in late { markClosing(id) }
        return late
    }

    /// The oldest unfinished head of the address holding the most connections, if it holds more than `newcomer`.
    private func victim(for newcomer: Int) -> UInt? {
        guard let (busiest, held) = perAddress.max(by: { $0.value < $1.value }), held > newcomer else { return nil }
        return entries.filter { $0.value.address == busiest && !$0.value.closing && !$0.value.headComplete }
            .min { $0.value.headStarted < $1.value.headStarted }?.key
    }

    private mutating func markClosing(_ id: UInt) {
        guard var entry = entries[id], !entry.closing else { return }
        entry.closing = true
        entries[id] = entry
        release(entry.address)
    }

    private mutating func release(_ address: String) {
        count -= 1
        let left = (perAddress[address] ?? 1) - 1
        perAddress[address] = left > 0 ? left : nil
    }
}
