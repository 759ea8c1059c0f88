// SFTP version 3's packets (draft-ietf-secsh-filexfer-02), the few a
// pipelined directory listing sends and reads (SFTPSession+Listing):
// OPENDIR, READDIR and CLOSE out; HANDLE, NAME and STATUS in. libssh2
// asks for one READDIR at a time, a round trip per batch of names (100
// with OpenSSH's server), so a listing of 2,000 files took 20 round trips.
// Pure: what comes from the server is bounded and parsed with checked
// arithmetic here, and unit tested.
import MediaSupport

enum SFTPWire {
    static let opendir: UInt8 = 11
    static let readdir: UInt8 = 12
    static let close: UInt8 = 4
    static let statusPacket: UInt8 = 101
    static let handlePacket: UInt8 = 102
    static let namePacket: UInt8 = 104
    /// The STATUS code of a directory's end (SFTPSession.statusFailure
    /// maps the rest).
    static let eof: UInt32 = 1
    /// The largest packet taken: OpenSSH's own limit (256 KiB).
    static let maxPacket = 256 << 10
    /// The longest handle (libssh2's bound) and name taken: a name past
    /// it is no file's on any system mediafs runs on.
    static let maxHandle = 256
    static let maxName = 4096

    /// A request: its type, id and string arguments, length first.
    static func request(_ type: UInt8, id: UInt32, _ strings: [[UInt8]]) -> [UInt8] {
        var body: [UInt8] = [type]
        append(id, to: &body)
        for string in strings {
            append(UInt32(string.count), to: &body)
            body += string
        }
        var packet: [UInt8] = []
        append(UInt32(body.count), to: &packet)
        return packet + body
    }

    private static func append(_ value: UInt32, to bytes: inout [UInt8]) {
        bytes += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    /// The length of the packet `bytes` begins with, once its 4 bytes are
    /// there; an error past `maxPacket`.
    static func packetLength(_ bytes: ArraySlice<UInt8>) throws -> Int? {
        guard bytes.count >= 4 else { return nil }
        var reader = Reader(bytes)
        let length = Int(try reader.u32())
        guard length >= 5, length <= maxPacket else { throw Malformed("a packet of \(length) bytes") }
        return length
    }

    /// One packet's body (after its length): type, id, the rest.
    struct Packet {
        var type: UInt8
        var id: UInt32
        var rest: Reader
    }

    static func packet(_ body: ArraySlice<UInt8>) throws -> Packet {
        var reader = Reader(body)
        let type = try reader.u8()
        return Packet(type: type, id: try reader.u32(), rest: reader)
    }

    /// A NAME packet's entries: each name with its attributes (the long
    /// name, `ls -l` text, skipped).
    static func names(_ reader: inout Reader) throws -> [(name: [UInt8], attributes: Attributes)] {
        let count = Int(try reader.u32())
        // Each entry takes at least 12 bytes: a count past that is a lie.
        guard count <= reader.left / 12 else { throw Malformed("a batch of \(count) names") }
        var entries: [(name: [UInt8], attributes: Attributes)] = []
        entries.reserveCapacity(count)
        for _ in 0..<count {
            let name = Array(try reader.string())
            guard name.count <= maxName else { throw Malformed("a name of \(name.count) bytes") }
            _ = try reader.string()
            entries.append((name, try attributes(&reader)))
        }
        return entries
    }

    /// What a listing uses of an entry's ATTRS.
    struct Attributes: Equatable {
        var size: UInt64?
        var permissions: UInt32?
        var mtime: UInt32?
    }

    static func attributes(_ reader: inout Reader) throws -> Attributes {
        let flags = try reader.u32()
        var out = Attributes()
        if flags & 0x1 != 0 { out.size = try reader.u64() }
        if flags & 0x2 != 0 { _ = try reader.u32(); _ = try reader.u32() }
        if flags & 0x4 != 0 { out.permissions = try reader.u32() }
        if flags & 0x8 != 0 { _ = try reader.u32(); out.mtime = try reader.u32() }
        if flags & 0x8000_0000 != 0 {
            let count = try reader.u32()
            guard count <= UInt32(reader.left / 8) else { throw Malformed("\(count) extended attributes") }
            for _ in 0..<count { _ = try reader.string(); _ = try reader.string() }
        }
        return out
    }

    /// A STATUS packet's code and message.
    static func status(_ reader: inout Reader) throws -> (code: UInt32, message: String) {
        let code = try reader.u32()
        let message = (try? reader.string()).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return (code, message)
    }

    /// Big-endian fields and length-prefixed strings, each checked
    /// against what is left.
    struct Reader {
        private let bytes: ArraySlice<UInt8>
        private var offset: Int

        init(_ bytes: ArraySlice<UInt8>) {
            self.bytes = bytes
            offset = bytes.startIndex
        }

        var left: Int { bytes.endIndex - offset }

        mutating func u8() throws -> UInt8 {
            guard left >= 1 else { throw Malformed("a packet cut short") }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func u32() throws -> UInt32 {
            guard left >= 4 else { throw Malformed("a packet cut short") }
            defer { offset += 4 }
            return bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }

        mutating func u64() throws -> UInt64 {
            UInt64(try u32()) << 32 | UInt64(try u32())
        }

        mutating func string() throws -> ArraySlice<UInt8> {
            let count = Int(try u32())
            guard count <= left else { throw Malformed("a string of \(count) bytes with \(left) left") }
            defer { offset += count }
            return bytes[offset..<offset + count]
        }
    }

    /// The server sent what SFTP v3 does not allow.
    struct Malformed: Error {
        let what: String
        init(_ what: String) { self.what = what }
    }
}
