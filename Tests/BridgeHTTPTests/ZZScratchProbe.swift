import BridgeCore
import BridgeHTTP
import Glibc
import Testing

@Test func zzProbe() throws {
    let (server, _) = try startRecordingServer(HTTPServerConfiguration(port: 0, maxHeaderBytes: 4096, maxBodyBytes: 1024))
    defer { server.stop() }
    let huge = String(repeating: "z", count: 200 * 1024)
    let cases: [(String, String)] = [
        ("garbage", "GARBAGE\r\n\r\n"),
        ("garbage2", "GET\r\n\r\n"),
        ("http10 no host", "GET / HTTP/1.0\r\n\r\n"),
        ("11 no host", "GET / HTTP/1.1\r\nConnection: close\r\n\r\n"),
        ("hdr 4200", "GET / HTTP/1.1\r\nHost: l\r\nX-Big: \(String(repeating: "h", count: 4200))\r\nConnection: close\r\n\r\n"),
        ("hdr 20000", "GET / HTTP/1.1\r\nHost: l\r\nX-Big: \(String(repeating: "h", count: 20000))\r\nConnection: close\r\n\r\n"),
        ("hdr 40000", "GET / HTTP/1.1\r\nHost: l\r\nX-Big: \(String(repeating: "h", count: 40000))\r\nConnection: close\r\n\r\n"),
        ("huge hdr", "GET / HTTP/1.1\r\nHost: l\r\nX-Huge: \(huge)\r\n\r\n"),
        ("huge line", "GET /\(huge) HTTP/1.1\r\nHost: l\r\n\r\n"),
        ("exact hdr", "GET / HTTP/1.1\r\nHost: l\r\nX-Big: \(String(repeating: "h", count: 4096 - 40 - 8))\r\nConnection: close\r\n\r\n"),
    ]
    for (name, text) in cases {
        let c = RawHTTPConnection(port: server.port)!
        let ok = c.send(text)
        let raw = c.readToEnd()
        let r = RawHTTPResponse(parsing: raw)
        print("PROBE \(name) len=\(text.utf8.count) sent=\(ok) bytes=\(raw.count) status=\(r?.status ?? -1) body=\(r?.bodyText.prefix(80) ?? "")")
    }
    for config in [HTTPServerConfiguration(port: 0, threadPoolSize: 1), HTTPServerConfiguration(port: 0, maxConnections: 2, threadPoolSize: 4),
                   HTTPServerConfiguration(port: 0, threadPoolSize: 0), HTTPServerConfiguration(port: 0, maxHeaderBytes: 100),
                   HTTPServerConfiguration(port: 0, threadPoolSize: 100000)] {
        let s = HTTPServer(configuration: config) { _ in HTTPResponse(status: 200) }
        let before = (0..<1024).filter { fcntl(Int32($0), F_GETFD) != -1 }.count
        do { try s.start(); print("PROBE start ok pool=\(config.threadPoolSize) max=\(config.maxConnections) port=\(s.port) ping=\(ping(port: s.port)?.status ?? -1)") }
        catch { print("PROBE start failed: \(error)") }
        s.stop()
        let after = (0..<1024).filter { fcntl(Int32($0), F_GETFD) != -1 }.count
        print("PROBE fds before=\(before) after=\(after)")
    }
}
