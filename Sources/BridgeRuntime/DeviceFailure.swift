/// Why a device poll or request gave nothing.
struct DeviceFailure: Error {
    var problem: String

    init(_ problem: String) {
        self.problem = problem
    }
}
