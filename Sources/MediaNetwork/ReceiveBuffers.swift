// A CurlTransfer's buffers, from its admission (`begin`) to its `end`: a
// transfer that waits costs its request and a few words, not 512 KiB of
// address space (a listing can queue a probe per entry). libcurl's error
// text goes into one; the body into the other, since libcurl hands over at
// most 16 KiB per call and collecting a round's bytes turns 32 small
// pwrites, locks and wake-ups into one. Owned by the network thread.
import CCurl

struct ReceiveBuffers {
    private(set) var errors: UnsafeMutablePointer<CChar>?
    private var body: UnsafeMutableRawPointer?
    /// Body bytes collected, not yet delivered.
    private(set) var count = 0

    /// Made at admission; `withBody`: false for a HEAD, which has none.
    mutating func allocate(withBody: Bool) {
        errors = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        if withBody { body = .allocate(byteCount: CurlFetcher.receiveBufferSize, alignment: 64) }
    }

    mutating func free() {
        errors?.deallocate()
        errors = nil
        body?.deallocate()
        body = nil
        count = 0
    }

    /// A new hop: no error said yet.
    func clearError() { errors?[0] = 0 }

    /// The error libcurl wrote, if any.
    var errorText: String? { errors.flatMap { $0[0] != 0 ? String(cString: $0) : nil } }

    /// Whether `bytes` more fit beside what is collected.
    func fits(_ bytes: Int) -> Bool { count + bytes <= CurlFetcher.receiveBufferSize }

    /// Collects `bytes`; false without a body buffer.
    mutating func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let body else { return false }
        (body + count).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        count += bytes.count
        return true
    }

    /// What is collected, handed over (valid until the next append or free).
    mutating func take() -> UnsafeRawBufferPointer? {
        guard count > 0, let body else { return nil }
        defer { count = 0 }
        return UnsafeRawBufferPointer(start: body, count: count)
    }
}
