import Glibc

/// A certificate and private key in PEM, read from their files and kept as C strings for as long as the
/// daemon runs: libmicrohttpd takes them as `MHD_OPTION_HTTPS_MEM_CERT` / `_KEY` pointers and does not copy
/// them itself.
///
/// `@unchecked Sendable` because it holds raw C pointers. They are written once in `init`, only read (by MHD,
/// while starting) afterwards, and freed once in `deinit`, after the `DaemonHandle` that owns this value has
/// stopped MHD.
final class TLSCredentials: @unchecked Sendable {
    let certificate: UnsafeMutablePointer<CChar>
    let key: UnsafeMutablePointer<CChar>

    init(_ files: HTTPServerConfiguration.TLS) throws(HTTPServerError) {
        let certificateText = try Self.read(files.certificateFile, what: "TLS certificate")
        let keyText = try Self.read(files.keyFile, what: "TLS key")
        guard let certificate = strdup(certificateText), let key = strdup(keyText) else {
            throw HTTPServerError(message: "out of memory reading the TLS files")
        }
        self.certificate = certificate
        self.key = key
    }

    deinit {
        // Overwritten first: the key should not linger in freed memory.
        memset(key, 0, strlen(key))
        free(key)
        free(certificate)
    }

    private static func read(_ path: String, what: String) throws(HTTPServerError) -> String {
        guard let file = fopen(path, "rb") else {
            throw HTTPServerError(message: "cannot read the \(what) \(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        // A certificate chain is a few KiB; 1 MiB bounds what a wrong path (a log file, say) can make us read.
        while bytes.count <= 1 << 20 {
            let count = fread(&buffer, 1, buffer.count, file)
            guard count > 0 else { break }
            bytes.append(contentsOf: buffer[..<count])
        }
        guard bytes.count <= 1 << 20, !bytes.contains(0) else {
            throw HTTPServerError(message: "the \(what) \(path) is not a PEM file")
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
