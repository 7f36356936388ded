import BridgeStorage
import Foundation
import Testing

/// Tokens survive the bridge being killed mid-login: the signing key they depend on is made and
/// stored in SQLite before the bridge listens, and a kill at any point never loses or changes it.
@Suite(.timeLimit(.minutes(5)))
struct SessionDurabilityTests {
    static let kills = 50

    @Test func tokensSurviveFiftySIGKILLsMidWrite() async throws {
        let broker = try await TestBroker()
        let folder = try TestFiles.makeDirectory("durability")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = folder.appendingPathComponent("bridge.sqlite").path
        var issued: [String] = []
        var inFlightAtKill = 0

        for _ in 0..<Self.kills {
            let bridge = try await BridgeProcess(broker: broker, storagePath: storage)
            let port = bridge.httpPort
            let logins = (0..<3).map { index in
                Task { () -> String? in
                    let user = index.isMultiple(of: 2) ? ("Cemalettin", "12345") : ("Mehmet", "123456")
                    return try? await APITests.token(port, user.0, user.1)
                }
            }
            // Two answered, the third probably still hashing or writing: kill now.
            for task in logins.prefix(2) { if let token = await task.value { issued.append(token) } }
            bridge.signal(SIGKILL)
            _ = bridge.waitForExit(timeout: 10)
            if let late = await logins[2].value { issued.append(late) } else { inFlightAtKill += 1 }
        }

        let database = try Database(path: storage)
        #expect(try database.query("PRAGMA integrity_check").first?.first?.text == "ok")
        let bridge = try await BridgeProcess(broker: broker, storagePath: storage)
        var rejected = 0
        for token in issued {
            let reply = try await HTTP.send(bridge.httpPort, "/api/v1/rooms", method: "GET", token: token)
            if reply.status != 200 { rejected += 1 }
        }
        #expect(issued.count >= 2 * Self.kills)
        #expect(rejected == 0, "\(rejected) of \(issued.count) issued tokens were lost")
        print("durability: \(Self.kills) SIGKILLs, \(issued.count) tokens issued and all valid after restart, "
            + "\(inFlightAtKill) logins cut off by the kill")
    }
}
