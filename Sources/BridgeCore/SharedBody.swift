import Synchronization

/// Bytes answered unchanged to many requests (a room's document until the room changes, a user's
/// room list), with a place where the server adapter keeps what it made of them the first time, so
/// that later answers skip making it again (docs/performance.md, "Prepared responses").
public final class SharedBody: Sendable {
    public let bytes: [UInt8]
    /// The adapter's prepared response for these bytes; made on first send, dropped with them.
    public let prepared = PreparedSlot()

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }
}

/// One object stored once and read without a lock (the server adapter's prepared response, a room's
/// documents): the servers' threads read it on every request for the same room, where a lock would
/// queue them.
public final class PreparedSlot: Sendable {
    /// An `Unmanaged<AnyObject>` retained by the slot, or 0.
    private let stored = Atomic<UInt>(0)

    public init() {}

    /// The stored object, or the one `make` returns, stored; when two threads make one at once,
    /// the first stored is kept and returned to both.
    public func value<Value: AnyObject & Sendable>(orMake make: () -> Value?) -> Value? {
        let current = stored.load(ordering: .acquiring)
        if current != 0 { return Self.object(current) as? Value }
        guard let made = make() else { return nil }
        let retained = UInt(bitPattern: Unmanaged.passRetained(made as AnyObject).toOpaque())
        let (exchanged, original) = stored.compareExchange(
            expected: 0, desired: retained, ordering: .acquiringAndReleasing)
        if exchanged { return made }
        Unmanaged<AnyObject>.fromOpaque(UnsafeRawPointer(bitPattern: retained)!).release()
        return Self.object(original) as? Value
    }

    /// The stored object, if there is one.
    public func current<Value: AnyObject & Sendable>() -> Value? {
        let current = stored.load(ordering: .acquiring)
        return current == 0 ? nil : Self.object(current) as? Value
    }

    private static func object(_ bits: UInt) -> AnyObject {
        Unmanaged<AnyObject>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).takeUnretainedValue()
    }

    deinit {
        let current = stored.load(ordering: .acquiring)
        if current != 0 { Unmanaged<AnyObject>.fromOpaque(UnsafeRawPointer(bitPattern: current)!).release() }
    }
}

extension Array {
    /// Whether both are the very same array: one storage, as a copy of a `let` list shares it. A cheaper
    /// test than comparing elements, for lists answered on every request (docs/performance.md,
    /// "Prepared responses"). Two empty arrays count as the same.
    public func sharesStorage(with other: [Element]) -> Bool {
        count == other.count && withUnsafeBufferPointer { mine in
            other.withUnsafeBufferPointer { $0.baseAddress == mine.baseAddress }
        }
    }
}
