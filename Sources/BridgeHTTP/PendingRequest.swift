/// The body of one request as it arrives, kept in MHD's per-request `*con_cls` slot between callbacks.
///
/// Not Sendable and not locked: MHD calls the access handler for a given request from one thread at a time.
final class PendingRequest {
    /// What `*con_cls` holds for a request whose body has not started (most have none): a marker that is
    /// never dereferenced or released, so such a request costs no allocation.
    nonisolated(unsafe) static let none = UnsafeMutableRawPointer(bitPattern: 1)!
    /// The body of a request that had none. Only read: never appended to (`append` is called only on a
    /// request's own object, made once data arrives).
    nonisolated(unsafe) static let empty = PendingRequest()

    private(set) var body: [UInt8] = []
    /// Set once the body outgrows the limit; from then on data is discarded, so memory stays bounded.
    private(set) var isTooLarge = false

    func append(_ chunk: UnsafeRawBufferPointer, limit: Int) {
        guard !isTooLarge else { return }
        guard body.count + chunk.count <= limit else {
            isTooLarge = true
            body = []
            return
        }
        body.append(contentsOf: chunk)
    }
}
