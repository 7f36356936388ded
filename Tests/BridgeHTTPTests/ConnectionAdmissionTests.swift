import BridgeCore
@testable import BridgeHTTP
import Testing

@Suite("Which connections the server keeps, without sockets")
struct ConnectionAdmissionTests {
    private static let limits = ConnectionAdmission.Limits(maxConnections: 16, maxPerAddress: 10, headTimeout: 10)

    @Test func theLastSlotsGoOnlyToClientsHoldingFew() {
        var admission = ConnectionAdmission(limits: Self.limits)  // 16 slots, 2 reserved
        for id in 0..<14 {
            #expect(admission.connectionStarted(UInt(id), address: id < 7 ? "10.0.0.1" : "10.0.0.2", now: 0) == .admit)
        }
        #expect(admission.connectionStarted(100, address: "10.0.0.1", now: 0) == .refuse)
        #expect(admission.connectionStarted(101, address: "10.0.0.3", now: 0) == .admit)
        #expect(admission.connectionStarted(102, address: "10.0.0.3", now: 0) == .admit)
        #expect(admission.count == 16)
    }

    @Test func whenFullANewcomerDisplacesTheOldestUnfinishedHeadOfTheBusiestClient() {
        var admission = ConnectionAdmission(limits: .init(maxConnections: 4, maxPerAddress: 10, headTimeout: 10))
        #expect(admission.connectionStarted(1, address: "a", now: 0) == .admit)
        admission.observeHead(1, startedAt: 0, complete: true)
        #expect(admission.connectionStarted(2, address: "a", now: 1) == .admit)
        #expect(admission.connectionStarted(3, address: "a", now: 2) == .admit)
        #expect(admission.connectionStarted(4, address: "b", now: 3) == .admit)
        // 1 has a complete head (being served), so 2 is the oldest unfinished one.
        #expect(admission.connectionStarted(5, address: "c", now: 4) == .admitDisplacing(2))
        #expect(admission.connections(of: "a") == 2)
        // "a" now holds 2, a newcomer from "b" would hold 2: no one to displace.
        #expect(admission.connectionStarted(6, address: "b", now: 5) == .refuse)
        admission.connectionClosed(2)
        admission.connectionClosed(6)
        #expect(admission.count == 4)
    }

    @Test func perAddressLimitRefuses() {
        var admission = ConnectionAdmission(limits: .init(maxConnections: 100, maxPerAddress: 2, headTimeout: 10))
        #expect(admission.connectionStarted(1, address: "a", now: 0) == .admit)
        #expect(admission.connectionStarted(2, address: "a", now: 0) == .admit)
        #expect(admission.connectionStarted(3, address: "a", now: 0) == .refuse)
        admission.connectionClosed(3)
        admission.connectionClosed(1)
        #expect(admission.connectionStarted(4, address: "a", now: 0) == .admit)
    }

    @Test func headDeadlineCountsFromTheStartAndAgainAfterEachRequest() {
        var admission = ConnectionAdmission(limits: Self.limits)
        _ = admission.connectionStarted(1, address: "a", now: 0)
        _ = admission.connectionStarted(2, address: "a", now: 0)
        admission.observeHead(2, startedAt: 0, complete: true)
        #expect(admission.expired(now: 9.9).isEmpty)
        #expect(admission.expired(now: 10) == [1])
        #expect(admission.expired(now: 11).isEmpty)  // already closing
        admission.observeHead(2, startedAt: 20, complete: false)
        #expect(admission.expired(now: 29).isEmpty)
        #expect(admission.expired(now: 30) == [2])
        #expect(admission.count == 0)
    }

    @Test func ipv6ClientsCountPerSlash64() {
        #expect(ClientAddress.throttleKey("2001:db8:0:1::1") == "2001:db8:0:1::/64")
        #expect(ClientAddress.throttleKey("2001:db8:0:1:ff00::99") == ClientAddress.throttleKey("2001:db8:0:1::1"))
        #expect(ClientAddress.throttleKey("2001:db8:0:2::1") != ClientAddress.throttleKey("2001:db8:0:1::1"))
        #expect(ClientAddress.throttleKey("127.0.0.1") == "127.0.0.1")
    }
}
