// A directory's listing with its READDIRs pipelined: SFTP v3 packets
// (SFTPWire) written to and read from the session's SFTP channel itself,
// `readdirsInFlight` asked at once on the one handle, which the server
// answers in order, batch after batch (OpenSSH: 100 names each). Through
// the bench's 100 ms link, 2,000 files were 20 round trips of libssh2's
// one-at-a-time readdir; here they are 2, and the open and the close one
// each, as before.
//
// Only on a session that never opened a file: libssh2 asks ahead of a
// kept file's reads and may still be owed those answers on the channel,
// which this would take from it. Such a session lists through libssh2.
import CSSH2
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

extension SFTPSession {
    /// READDIRs kept in flight: 1,600 names a round trip with OpenSSH.
    static let readdirsInFlight = 16

    /// The raw entries of the directory at `path`, or nil when this session
    /// cannot list this way (it has read files). The handle is closed, and
    /// every answer read, before it returns: the channel is libssh2's again.
    func listPipelined(path: String) throws -> [(name: [UInt8], attributes: SFTPWire.Attributes)]? {
        guard !hasOpenedFiles, let sftp, let channel = libssh2_sftp_get_channel(sftp) else { return nil }
        var wire = RawChannel(channel: channel)
        let what = "listing directory '\(path)'"
        do {
            let opened = try wire.ask(SFTPWire.opendir, [Array(path.utf8)])
            var reply = try wire.answer()
            guard reply.id == opened else { throw SFTPWire.Malformed("an answer to request \(reply.id)") }
            if reply.type == SFTPWire.statusPacket {
                let status = try SFTPWire.status(&reply.rest)
                throw statusFailure(status.code, "cannot open directory '\(path)'", detail: status.message)
            }
            guard reply.type == SFTPWire.handlePacket else { throw SFTPWire.Malformed("a packet of type \(reply.type)") }
            let handle = Array(try reply.rest.string())
            guard handle.count <= SFTPWire.maxHandle else { throw SFTPWire.Malformed("a handle of \(handle.count) bytes") }
            var entries: [(name: [UInt8], attributes: SFTPWire.Attributes)] = []
            var asked: [UInt32] = []
            var ended = false
            var failed: MediaError?
            for _ in 0..<Self.readdirsInFlight { asked.append(try wire.ask(SFTPWire.readdir, [handle])) }
            while !asked.isEmpty {
                var packet = try wire.answer()
                guard let index = asked.firstIndex(of: packet.id) else {
                    throw SFTPWire.Malformed("an answer to request \(packet.id)")
                }
                asked.remove(at: index)
                switch packet.type {
                case SFTPWire.namePacket:
                    let batch = try SFTPWire.names(&packet.rest)
                    // An empty batch is the end, as libssh2 reads it.
                    if batch.isEmpty { ended = true }
                    // `.` and `..` come in the batches too: two more than the bound.
                    if entries.count + batch.count > Self.maxEntries + 2 {
                        if failed == nil {
                            failed = MediaError(EFBIG, "sftp \(name): directory '\(path)' has more than \(Self.maxEntries) entries")
                        }
                        ended = true
                    } else {
                        entries += batch
                    }
                    if !ended { asked.append(try wire.ask(SFTPWire.readdir, [handle])) }
                case SFTPWire.statusPacket:
                    // Past the end, what a server answers the READDIRs
                    // asked ahead is no failure of the listing.
                    let status = try SFTPWire.status(&packet.rest)
                    if status.code != SFTPWire.eof, !ended, failed == nil {
                        failed = statusFailure(status.code, what, detail: status.message)
                    }
                    ended = true
                default:
                    throw SFTPWire.Malformed("a packet of type \(packet.type)")
                }
            }
            let closing = try wire.ask(SFTPWire.close, [handle])
            guard try wire.answer().id == closing else { throw SFTPWire.Malformed("an answer out of order") }
            if let failed { throw failed }
            return entries
        } catch let malformed as SFTPWire.Malformed {
            broken = true
            throw MediaError(EIO, "sftp \(name): \(what): the server sent \(malformed.what)")
        } catch RawChannel.Failed.io {
            // The channel ended or timed out: libssh2's last error may be an
            // older call's, so only a timeout is told apart.
            broken = true
            if let session, libssh2_session_last_errno(session) == LIBSSH2_ERROR_TIMEOUT {
                throw MediaError(EIO, "sftp \(name): \(what): no answer in \(timeout) s (--timeout)")
            }
            throw MediaError(EIO, "sftp \(name): \(what): the connection ended")
        }
    }

    /// Packets written to and read from a channel, in blocking mode (each
    /// wait bounded by the session's timeout).
    private struct RawChannel {
        let channel: OpaquePointer
        /// Ids far above libssh2's own (it counts from 0 per channel).
        private var nextID: UInt32 = 0xF000_0000
        private var inbox: [UInt8] = []
        private var buffer = [UInt8](repeating: 0, count: 64 << 10)

        enum Failed: Error { case io }

        init(channel: OpaquePointer) { self.channel = channel }

        /// Sends a request; returns its id.
        mutating func ask(_ type: UInt8, _ strings: [[UInt8]]) throws -> UInt32 {
            let id = nextID
            nextID &+= 1
            let packet = SFTPWire.request(type, id: id, strings)
            let channel = self.channel
            var sent = 0
            while sent < packet.count {
                let count = packet[sent...].withUnsafeBufferPointer { bytes in
                    bytes.withMemoryRebound(to: CChar.self) { libssh2_channel_write_ex(channel, 0, $0.baseAddress, $0.count) }
                }
                guard count > 0 else { throw Failed.io }
                sent += count
            }
            return id
        }

        /// The next packet from the server.
        mutating func answer() throws -> SFTPWire.Packet {
            while true {
                if let length = try SFTPWire.packetLength(inbox[...]), inbox.count >= 4 + length {
                    let packet = try SFTPWire.packet(inbox[4..<4 + length])
                    inbox.removeFirst(4 + length)
                    return packet
                }
                let channel = self.channel
                let count = buffer.withUnsafeMutableBufferPointer { bytes in
                    bytes.withMemoryRebound(to: CChar.self) { libssh2_channel_read_ex(channel, 0, $0.baseAddress, $0.count) }
                }
                guard count > 0 else { throw Failed.io }
                inbox += buffer[..<count]
            }
        }
    }
}
