// Indexes an archive on the network: every volume's head (and, for a
// format that needs it, its tail) read at once, then round after round of
// the ranges the index wants, each round's reads all at once through the
// mount's fetcher (its admission bounds what runs per origin). The bytes
// are read into ArchiveVolumes and indexed by the format's parser; nothing
// here trusts a header. Blocking: called on a listing's thread.
import Foundation
import MediaNetwork
import MediaSupport
import MediaStore

package enum ArchiveReader {
    /// The head read of each volume (the bound: 64 KiB a volume).
    static let headBytes: Int64 = 64 << 10
    /// Rounds of wanted ranges before the archive is given up on.
    static let maxRounds = 6
    /// Bytes one round may read of one volume (a ZIP's central directory
    /// can be large; a RAR header's read-ahead is 64 KiB).
    static let maxWanted: Int64 = 16 << 20

    package enum Format: Sendable { case rar, zip }

    /// A volume as its listing names it.
    package struct Volume: Sendable {
        package var name: String
        package var url: String
        package init(name: String, url: String) {
            self.name = name
            self.url = url
        }
    }

    /// What was learned: the index, and each volume's length and validators.
    package struct Result: Sendable {
        package var index: ArchiveIndex
        package var volumes: [(length: Int64, etag: String?, lastModified: String?)]
        package var rounds: Int
    }

    package static func index(_ format: Format, volumes: [Volume], fetcher: Fetching, timeout: Double,
                             clock: Clock) throws -> Result {
        // Round 1: every head at once; the answers give the lengths.
        let heads = try read(volumes.indices.map { ($0, 0..<headBytes) }, of: volumes, fetcher: fetcher, timeout: timeout, clock: clock)
        let known = heads.map { (length: $0.length, etag: $0.etag, lastModified: $0.lastModified) }
        var parsed = try zip(volumes, heads).map { volume, head in
            try ArchiveVolume(name: volume.name, length: head.length, head: head.bytes)
        }
        var rounds = 1
        while true {
            let index = try indexed(format, parsed)
            if index.isComplete { return Result(index: index, volumes: known, rounds: rounds) }
            guard rounds < maxRounds else {
                throw MediaError.io("\(volumes[0].name): still wanting header bytes after \(rounds) rounds of reads")
            }
            let wanted = index.wanted.map { extent -> (Int, Range<Int64>) in
                (extent.volume, extent.range.lowerBound..<min(extent.range.upperBound, extent.range.lowerBound + maxWanted))
            }
            guard wanted.allSatisfy({ parsed.indices.contains($0.0) && !$0.1.isEmpty }) else {
                throw MediaError.io("\(volumes[0].name): its index asked for a range outside its volumes")
            }
            let answers = try read(wanted, of: volumes, fetcher: fetcher, timeout: timeout, clock: clock)
            for ((volume, range), answer) in zip(wanted, answers) {
                // A volume that changed length between two reads is no one set.
                guard answer.length == known[volume].length, answer.etag == known[volume].etag else {
                    throw MediaError.io("\(volumes[volume].name) changed while it was being indexed")
                }
                try parsed[volume].add(answer.bytes, at: range.lowerBound)
            }
            rounds += 1
        }
    }

    private static func indexed(_ format: Format, _ volumes: [ArchiveVolume]) throws -> ArchiveIndex {
        switch format {
        case .zip:
            return try ZipIndex.index(volumes[0])
        case .rar:
            // Which RAR the first volume is decides the parser; a volume of
            // the other is refused by it, naming the volume.
            guard let (version, _) = try RARSignature.find(in: volumes[0]) else {
                var index = ArchiveIndex()
                index.wanted = [RARSignature.wanted(in: volumes[0], input: 0)]
                return index
            }
            return version == .rar5 ? try RAR5Index.index(volumes) : try RAR4Index.index(volumes)
        }
    }

    /// `reads` (volume, range), all started at once; their answers in order,
    /// or the first failure, naming its volume.
    private static func read(_ reads: [(Int, Range<Int64>)], of volumes: [Volume], fetcher: Fetching,
                             timeout: Double, clock: Clock) throws -> [VolumeRead.Answer] {
        let results = ConditionLocked<[Swift.Result<VolumeRead.Answer, MediaError>?]>(Array(repeating: nil, count: reads.count))
        var started: [TransferID] = []
        for (slot, (volume, range)) in reads.enumerated() {
            started.append(VolumeRead.start(url: volumes[volume].url, range: range, fetcher: fetcher) { result in
                results.withScope { scope in
                    scope.state[slot] = result
                    scope.broadcast()
                }
            })
        }
        let deadline = Deadline.after(seconds: timeout, clock: clock)
        let answered = results.withScope { scope in
            while scope.state.contains(where: { $0 == nil }) {
                guard scope.wait(until: deadline) else { return !scope.state.contains(where: { $0 == nil }) }
            }
            return true
        }
        guard answered else {
            for id in started { fetcher.cancel(id) }
            throw MediaError(ETIMEDOUT, "\(volumes[0].name): its headers did not arrive within \(Int(timeout)) s")
        }
        return try results.withLock { $0 }.enumerated().map { slot, result in
            switch result {
            case .success(let answer)?: return answer
            case .failure(let error)?: throw MediaError(error.errno, "\(volumes[reads[slot].0].name): \(error.message)")
            case nil: throw MediaError.io("\(volumes[reads[slot].0].name): no answer")
            }
        }
    }
}
