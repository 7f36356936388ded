import Foundation
import Glibc

/// Who may read the database's files. The database holds the token signing key (README "Sessions"), so its
/// folder is created 0700 and its file 0600; SQLite gives the WAL and shared-memory files the database
/// file's own mode. Files made earlier, or by hand, are reported rather than changed (README "Sessions").
public enum StorageFiles {
    /// Creates the folder (0700) and an empty database file (0600) when they don't exist yet.
    static func prepare(path: String) {
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty, !FileManager.default.fileExists(atPath: folder) {
            try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                     attributes: [.posixPermissions: 0o700])
        }
        // O_EXCL: an existing file keeps its mode and content; SQLite then opens the empty file as a new database.
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor >= 0 { close(descriptor) }
    }

    /// The database's files (the folder, the file, its WAL and shared-memory files) that users other than the
    /// owner may read, each with its mode in octal, e.g. `./data/bridge.sqlite (0644)`.
    public static func readableByOthers(databasePath path: String) -> [String] {
        let folder = (path as NSString).deletingLastPathComponent
        let files = [folder.isEmpty ? "." : folder, path, path + "-wal", path + "-shm"]
        return files.compactMap { file in
            var status = stat()
            guard stat(file, &status) == 0 else { return nil }
            let mode = status.st_mode & 0o777
            // A folder's read and search bits for group and others expose its names; a file's read bits its content.
            let isFolder = status.st_mode & S_IFMT == S_IFDIR
            guard mode & (isFolder ? 0o055 : 0o044) != 0 else { return nil }
            return "\(file) (0\(String(mode, radix: 8)))"
        }
    }
}
