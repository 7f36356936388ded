import BridgeCore
import BridgeHTTP
import Testing

/// The answers libmicrohttpd 0.9.75 writes by itself, before any request reaches the bridge's code
/// (docs/security.md, "libmicrohttpd's own error pages"): each case sent over a raw socket, with
/// what it gets. They are pinned here so that the documented list stays true: each is a fixed
/// text with nothing of the request in it, without the security headers (the library has no option
/// or callback to replace them), the connection is closed, and the server goes on serving.
@Suite("libmicrohttpd's own error answers")
struct LibraryErrorPageTests {
    private static let limits = HTTPServerConfiguration(port: 0, maxHeaderBytes: 4096, maxBodyBytes: 1024)
    /// Put in every request: it must never come back.
    private static let marker = "MARKER<script>"

    @Test(arguments: [
        ("a malformed HTTP version", "GET /\(marker) HTTP/1.x\r\nHost: localhost\r\n\r\n", 400),
        ("a header line without a colon", "GET /x HTTP/1.1\r\nHost: localhost\r\n\(marker)\r\n\r\n", 400),
        ("HTTP/0.9 and older", "GET /\(marker) HTTP/0.9\r\nHost: localhost\r\n\r\n", 505),
        ("HTTP/2 and later in a text request line", "GET /\(marker) HTTP/2.0\r\nHost: localhost\r\n\r\n", 505),
        ("a Content-Length that is not a number",
         "POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: \(marker)\r\n\r\n", 400),
        ("a Content-Length past 64 bits",
         "POST /\(marker) HTTP/1.1\r\nHost: localhost\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413),
        ("a malformed chunk size",
         "POST /x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n\(marker)\r\n\r\n", 400),
        ("a chunk size past 64 bits",
         "POST /\(marker) HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFFFFFF\r\n\r\n", 413),
        ("HTTP/1.1 without Host is the bridge's to answer (libmicrohttpd refuses it only when strict)",
         "GET /\(marker) HTTP/1.1\r\nConnection: close\r\n\r\n", 0),
        ("a head past the connection's memory (twice http.max_header_bytes, at least 32 KiB)",
         "GET /x HTTP/1.1\r\nHost: localhost\r\nX-Big: \(marker)\(String(repeating: "h", count: 40_000))\r\n\r\n", 431),
        ("a request line past the connection's memory",
         "GET /\(marker)\(String(repeating: "u", count: 40_000)) HTTP/1.1\r\nHost: localhost\r\n\r\n", 414),
    ])
    func answeredByTheLibraryItself(_ what: String, request: String, status: Int) throws {
        let (server, recorder) = try startRecordingServer(Self.limits)
        defer { server.stop() }
        let response = try #require(exchange(port: server.port, request), "\(what): no answer")
        guard status != 0 else {
            #expect(response.status == 200 && recorder.all.count == 1, "\(what): \(response.status)")
            return
        }
        #expect(response.status == status, "\(what)")
        #expect(!response.bodyText.contains("MARKER"), "\(what): the request came back: \(response.bodyText)")
        // What the bridge can't add: its JSON and the security headers.
        #expect(response.header("X-Content-Type-Options") == nil, "\(what): now has the headers; update docs/security.md")
        #expect(response.header("Content-Type") == nil, "\(what): \(response.headers)")
        #expect(response.header("Connection")?.lowercased() == "close", "\(what): \(response.headers)")
        #expect(recorder.all.isEmpty, "\(what) reached the handler")
        #expect(ping(port: server.port)?.status == 200, "\(what): the server stopped serving")
    }
}
