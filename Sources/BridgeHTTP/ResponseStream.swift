import BridgeCore
import CMicroHTTPD
import Synchronization

/// A response body written over time (Server-Sent Events), bridging writers on any thread to
/// libmicrohttpd's pull-style content reader.
///
/// When the reader finds nothing to send it suspends the connection (so MHD's thread does not spin)
/// and the next write resumes it. Writes never block: past `limit` unsent bytes they fail, and the
/// caller decides what to do with a client that far behind.
final class ResponseStream: HTTPStreamSink, @unchecked Sendable {
    // @unchecked: `connection` is only handed to MHD's suspend/resume, under `state`'s lock, while
    // the connection lives (`freed` is set by MHD's free callback before the connection goes).
    private let connection: OpaquePointer
    private let limit: Int
    private let state = Mutex(State())
    private let onFree: @Sendable (ResponseStream) -> Void

    private struct State {
        var pending: [UInt8] = []
        var sent = 0
        var suspended = false
        /// A last message is queued; after it, the stream ends.
        var finishing = false
        /// MHD is done with the stream (client gone, finished, or server stopping).
        var freed = false
        var unsent: Int { pending.count - sent }
    }

    init(connection: OpaquePointer, initial: [UInt8], limit: Int, onFree: @escaping @Sendable (ResponseStream) -> Void) {
        self.connection = connection
        self.limit = limit
        self.onFree = onFree
        state.withLock { $0.pending = initial }
    }

    func write(_ bytes: [UInt8]) -> Bool {
        state.withLock { state in
            guard !state.freed, !state.finishing, state.unsent + bytes.count <= limit else { return false }
            state.pending.append(contentsOf: bytes)
            resumeIfSuspended(&state)
            return true
        }
    }

    func finish(with bytes: [UInt8]) {
        state.withLock { state in
            guard !state.freed, !state.finishing else { return }
            state.pending.append(contentsOf: bytes)
            state.finishing = true
            resumeIfSuspended(&state)
        }
    }

    var isClosed: Bool { state.withLock { $0.freed || $0.finishing } }

    /// Called on MHD's thread for the next bytes; see `MHD_ContentReaderCallback`.
    func read(into buffer: UnsafeMutablePointer<CChar>, max: Int) -> Int {
        state.withLock { state in
            if state.unsent > 0 {
                let count = min(max, state.unsent)
                state.pending.withUnsafeBytes { bytes in
                    UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress! + state.sent, byteCount: count)
                }
                state.sent += count
                if state.sent > 64 * 1024 {  // drop what has gone out, now and then
                    state.pending.removeFirst(state.sent)
                    state.sent = 0
                }
                return count
            }
            if state.finishing || state.freed { return -1 }  // MHD_CONTENT_READER_END_OF_STREAM
            // Nothing to send: park the connection until a write resumes it (MHD allows suspending
            // from inside the content reader; returning 0 without it would spin).
            state.suspended = true
            MHD_suspend_connection(connection)
            return 0
        }
    }

    /// Ends the stream because the server is stopping; MHD must not be stopped with suspended connections.
    func stopForShutdown() {
        state.withLock { state in
            state.finishing = true
            resumeIfSuspended(&state)
        }
    }

    /// MHD released the response: the connection is closed or closing.
    func didFree() {
        state.withLock { $0.freed = true }
        onFree(self)
    }

    private func resumeIfSuspended(_ state: inout State) {
        guard state.suspended, !state.freed else { return }
        state.suspended = false
        MHD_resume_connection(connection)
    }
}

/// `MHD_ContentReaderCallback` for a `ResponseStream` passed as `cls`.
func mhdStreamReader(cls: UnsafeMutableRawPointer?, position: UInt64, buffer: UnsafeMutablePointer<CChar>?, max: Int)
    -> Int
{
    guard let cls, let buffer else { return -2 }  // MHD_CONTENT_READER_END_WITH_ERROR
    return Unmanaged<ResponseStream>.fromOpaque(cls).takeUnretainedValue().read(into: buffer, max: max)
}

/// `MHD_ContentReaderFreeCallback`: balances the retain made when the response was created.
func mhdStreamFreed(cls: UnsafeMutableRawPointer?) {
    guard let cls else { return }
    let stream = Unmanaged<ResponseStream>.fromOpaque(cls)
    stream.takeUnretainedValue().didFree()
    stream.release()
}
