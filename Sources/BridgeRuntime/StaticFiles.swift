import BridgeCore
import Foundation

/// Serves the web dashboard's files (HTML, CSS, JavaScript modules, SVG icons) from one folder,
/// read from disk on each request so an edited page shows on reload.
struct StaticFiles: Sendable {
    let root: URL

    /// The files' types, by extension; anything else is not served.
    static let contentTypes: [String: String] = [
        "html": "text/html; charset=utf-8",
        "js": "text/javascript; charset=utf-8",
        "mjs": "text/javascript; charset=utf-8",
        "css": "text/css; charset=utf-8",
        "svg": "image/svg+xml",
        "png": "image/png",
        "ico": "image/x-icon",
        "json": "application/json; charset=utf-8",
        "webmanifest": "application/manifest+json",
    ]

    /// Pages may load only the dashboard's own files and talk only to this bridge.
    static let pagePolicy = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        + "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    /// The folder's files, or `nil` when the folder does not exist.
    init?(root path: String) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
            return nil
        }
        // Resolved once, so the prefix check below compares real paths (the root may itself be a link).
        root = URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath()
    }

    /// The file for a request path (`/` is `index.html`), or `nil` when there is none.
    func response(for path: String) -> HTTPResponse? {
        let relative = path == "/" ? "index.html" : String(path.drop { $0 == "/" })
        let segments = relative.split(separator: "/", omittingEmptySubsequences: false)
        // No way out of the folder, no hidden files, no empty segments.
        guard !segments.isEmpty, segments.allSatisfy({ !$0.isEmpty && !$0.hasPrefix(".") }) else { return nil }
        // NUL would end the path inside the C library ("index.html%00.png" would read index.html as an image);
        // the router refuses it already, and this keeps the folder safe on its own.
        guard !relative.utf8.contains(0) else { return nil }
        // Links are resolved before the prefix check, so a link inside the folder can't serve a file outside it.
        let file = root.appendingPathComponent(relative).standardizedFileURL.resolvingSymlinksInPath()
        guard file.path.hasPrefix(root.path + "/"),
              let type = StaticFiles.contentTypes[file.pathExtension.lowercased()],
              let data = FileManager.default.contents(atPath: file.path)
        else { return nil }
        var headers: [(name: String, value: String)] = [("Content-Type", type), ("Cache-Control", "no-cache")]
        if file.pathExtension.lowercased() == "html" {
            headers.append(("Content-Security-Policy", StaticFiles.pagePolicy))
        }
        return HTTPResponse(status: 200, headers: headers, body: Array(data))
    }
}
