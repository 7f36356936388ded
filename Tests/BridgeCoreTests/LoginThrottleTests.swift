import Testing
@testable import BridgeCore

@Suite struct LoginThrottleTests {
    /// One whole attempt: the wait when throttled, nil when the password was checked (and failed unless `ok`).
    @discardableResult
    func attempt(_ throttle: inout LoginThrottle, _ user: String, from address: String, known: Bool = true,
                 ok: Bool = false, at now: Double) -> Double? {
        switch throttle.reserve(username: user, address: address, knownUser: known, now: now) {
        case .throttled(let wait): return wait
        case .check(let ticket):
            throttle.finish(ticket, succeeded: ok, now: now)
            return nil
        }
    }

    /// A policy without the global budget, for the per-key rules.
    static var unlimited: LoginThrottle.Policy {
        var policy = LoginThrottle.Policy()
        policy.checksPerSecond = 1_000_000
        policy.checkBurst = 1_000_000
        policy.maxConcurrentChecks = 1_000
        return policy
    }

    @Test func failuresPastTheFreeOnesBlockWithDoublingDelays() {
        var throttle = LoginThrottle(policy: Self.unlimited)
        for second in 0..<4 { #expect(attempt(&throttle, "a", from: "1.1.1.1", at: Double(second)) == nil) }
        // The 4th failure blocked for 1 s, in any case of the name and from any address.
        #expect(attempt(&throttle, "A", from: "9.9.9.9", at: 3.5) == 0.5)
        #expect(attempt(&throttle, "a", from: "1.1.1.1", at: 4) == nil)  // 5th: 2 s
        #expect(attempt(&throttle, "a", from: "1.1.1.1", at: 5) == 1)
        #expect(attempt(&throttle, "a", from: "1.1.1.1", at: 6) == nil)  // 6th: 4 s
        #expect(attempt(&throttle, "a", from: "1.1.1.1", at: 6) == 4)
        #expect(attempt(&throttle, "b", from: "1.1.1.1", at: 6) == nil, "another user is not blocked")
    }

    @Test func delaysAreCapped() {
        var throttle = LoginThrottle(policy: Self.unlimited)
        for second in 0..<100 { attempt(&throttle, "a", from: "x\(second)", at: Double(second) * 1000) }
        #expect(attempt(&throttle, "a", from: "y", at: 99_000) == throttle.policy.maxDelay)
    }

    /// Behind one NAT address, a guesser's 21 failures on other names don't stop a user with no failures of
    /// their own, but do stop unknown names and users who have failed themselves.
    @Test func theAddressLimitNeverBlocksACleanUsersCorrectPassword() {
        var throttle = LoginThrottle(policy: Self.unlimited)
        for index in 0..<21 { attempt(&throttle, "guess\(index)", from: "6.6.6.6", known: false, at: 0) }
        #expect(attempt(&throttle, "nobody", from: "6.6.6.6", known: false, at: 0) != nil)
        #expect(attempt(&throttle, "mehmet", from: "6.6.6.6", ok: true, at: 0) == nil)
        #expect(attempt(&throttle, "mehmet", from: "6.6.6.6", ok: true, at: 0) == nil, "still clean after a success")
        #expect(attempt(&throttle, "ayse", from: "6.6.6.6", at: 0) == nil, "one check for a clean user")
        #expect(attempt(&throttle, "ayse", from: "6.6.6.6", ok: true, at: 0) != nil, "then her failure counts")
        #expect(attempt(&throttle, "nobody", from: "7.7.7.7", known: false, at: 0) == nil, "another address")
    }

    @Test func ipv6AddressesCountPerSlash64() {
        var throttle = LoginThrottle(policy: Self.unlimited)
        for index in 0..<21 { attempt(&throttle, "g\(index)", from: "2001:db8:0:1::\(index + 1)", known: false, at: 0) }
        #expect(attempt(&throttle, "g", from: "2001:db8:0:1:ffff::9", known: false, at: 0) != nil)
        #expect(attempt(&throttle, "g", from: "2001:db8:0:2::1", known: false, at: 0) == nil)
        #expect(ClientAddress.throttleKey("2001:db8::1") == "2001:db8:0:0::/64")
        #expect(ClientAddress.throttleKey("10.0.0.1") == "10.0.0.1")
    }

    /// Reserved checks count as the failures they may become: 40 at once get 4 checks, as 40 in a row do.
    @Test func parallelAttemptsAreReservedAtomically() {
        var throttle = LoginThrottle(policy: Self.unlimited)
        var tickets: [LoginThrottle.Ticket] = []
        var throttled = 0
        for _ in 0..<40 {
            switch throttle.reserve(username: "a", address: "1.1.1.1", knownUser: true, now: 0) {
            case .check(let ticket): tickets.append(ticket)
            case .throttled: throttled += 1
            }
        }
        #expect(tickets.count == 4)
        #expect(throttled == 36)
        for ticket in tickets { throttle.finish(ticket, succeeded: false, now: 0) }
        #expect(throttle.inFlight == 0)
        #expect(attempt(&throttle, "a", from: "1.1.1.1", at: 0) == 1)
    }

    @Test func aGlobalBudgetBoundsChecksWhateverTheAddresses() {
        var throttle = LoginThrottle()  // 4 at once, 10/s, bursts of 20
        var reserved: [LoginThrottle.Ticket] = []
        for index in 0..<10 {
            if case .check(let ticket) = throttle.reserve(username: "u\(index)", address: "10.0.0.\(index)",
                                                          knownUser: true, now: 0) { reserved.append(ticket) }
        }
        #expect(reserved.count == 4, "at most 4 running")
        for ticket in reserved { throttle.finish(ticket, succeeded: true, now: 0) }
        var checked = 4
        for index in 10..<100 where attempt(&throttle, "u\(index)", from: "10.0.1.\(index)", ok: true, at: 0) == nil {
            checked += 1
        }
        #expect(checked == 20, "a burst of 20, from 100 addresses")
        #expect(attempt(&throttle, "late", from: "10.0.2.1", ok: true, at: 1) == nil, "10 more a second")
    }

    @Test func successClearsTheUserAndTimeForgets() {
        var throttle = LoginThrottle(policy: Self.unlimited)
        for _ in 0..<4 { attempt(&throttle, "a", from: "x", at: 0) }
        #expect(attempt(&throttle, "a", from: "x", at: 0.5) != nil)
        #expect(attempt(&throttle, "a", from: "y", ok: true, at: 100) == nil)
        #expect(attempt(&throttle, "a", from: "y", at: 100) == nil, "the success cleared its failures")
        for second in 0..<5 { attempt(&throttle, "b", from: "x", at: Double(second) * 100) }
        #expect(attempt(&throttle, "b", from: "x", at: 5000) == nil, "an hour later it starts afresh")
    }

    /// Memory stays bounded, and blocked entries are never the ones dropped.
    @Test func memoryStaysBoundedAndBlockedEntriesAreNeverEvicted() {
        var policy = Self.unlimited
        policy.maxEntries = 100
        var throttle = LoginThrottle(policy: policy)
        for _ in 0..<4 { attempt(&throttle, "victim", from: "v", at: 0) }  // blocked for 1 s
        for index in 0..<1000 { attempt(&throttle, "n\(index)", from: "a\(index)", at: 0.5) }
        #expect(attempt(&throttle, "victim", from: "w", at: 0.6) != nil, "the blocked name is still blocked")
        #expect(attempt(&throttle, "fresh", from: "z", at: 2) == nil, "old unblocked entries made room")
    }
}

@Suite struct APIBodyTests {
    @Test func loginBodies() throws {
        #expect(try APIBody.login(Array(#"{"username":"a","password":"b"}"#.utf8)).get()
            == APIBody.Login(username: "a", password: "b"))
        let cases: [(String, String)] = [
            ("", "empty"), ("{", "not valid JSON"), ("[]", "must be a JSON object"),
            (#"{"password":"b"}"#, "field \"username\" is required"),
            (#"{"username":"a"}"#, "field \"password\" is required"),
            (#"{"username":1,"password":"b"}"#, "field \"username\" must be a string"),
            (#"{"username":"","password":"b"}"#, "field \"username\" must not be empty"),
            (#"{"username":null,"password":"b"}"#, "field \"username\" is required"),
        ]
        for (body, message) in cases {
            guard case .failure(let problem) = APIBody.login(Array(body.utf8)) else {
                Issue.record("\(body) accepted")
                continue
            }
            #expect(problem.message.contains(message), "\(body): \(problem.message)")
        }
    }

    @Test func lightsBodies() throws {
        #expect(try APIBody.lights(Array(#"{"state":"on"}"#.utf8)).get() == .on)
        #expect(try APIBody.lights(Array(#"{"state":"TOGGLE"}"#.utf8)).get() == .toggle)
        guard case .failure(let problem) = APIBody.lights(Array(#"{"state":"DIM"}"#.utf8)) else {
            Issue.record("DIM accepted")
            return
        }
        #expect(problem.message == "field \"state\" must be ON, OFF or TOGGLE")
        guard case .failure(let missing) = APIBody.lights(Array(#"{"State":"ON"}"#.utf8)) else {
            Issue.record(#"{"State":"ON"} accepted"#)
            return
        }
        #expect(missing.message == "field \"state\" is required")
    }
}
