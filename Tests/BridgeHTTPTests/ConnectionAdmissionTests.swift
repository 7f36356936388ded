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
        admission.headCompleted(1)
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
        admission.headCompleted(2)
        #expect(admission.expired(now: 9.9).isEmpty)
        #expect(admission.expired(now: 10) == [1])
        #expect(admission.expired(now: 11).isEmpty)  // already closing
        admission.requestFinished(2, now: 20)
        #expect(admission.expired(now: 29).isEmpty)
        #expect(admission.expired(now: 30) == [2])
        #expect(admission.count == 0)
    }

    @Test func ipv6ClientsCountPerSlash64AndMappedIPv4AsIPv4() {
        var first = [UInt8](repeating: 0, count: 16)
        first[0] = 0x20; first[1] = 0x01; first[2] = 0x0d; first[3] = 0xb8; first[7] = 0x01; first[15] = 0x01
        var second = first
        second[8] = 0xff; second[15] = 0x99
        #expect(SocketAddressText.limitKey(ipv6: first) == "2001:db8:0:1::/64")
        #expect(SocketAddressText.limitKey(ipv6: second) == SocketAddressText.limitKey(ipv6: first))
        var mapped = [UInt8](repeating: 0, count: 16)
        mapped[10] = 0xff; mapped[11] = 0xff; mapped[12] = 127; mapped[15] = 1
        #expect(SocketAddressText.limitKey(ipv6: mapped) == nil)
    }
}
