// Bytes a transfer brought that the cache could not keep (no room under
// the limits, a failing disk, bytes being freed) and no waiting read took:
// kept in memory, a little, for the reads about to ask for them. A long
// transfer held at a read's end hands over whole chunks, and the part of
// the last one past the read would otherwise be lost, then asked for again
// by the next read in a request of its own: a request per read and bytes
// fetched twice (decision 0046). Bounded per file; the oldest go first; a
// read takes its bytes out; nothing here outlives the file's version.
import MediaSupport

struct PassingBytes {
    /// Bytes kept at most: a few reads' worth of a kernel's 128 KiB windows.
    static let capacity = 1 << 20

    private var chunks: [(start: Int64, bytes: [UInt8])] = []
    private(set) var count = 0

    var isEmpty: Bool { chunks.isEmpty }

    /// Keeps `bytes` (at file offset `start`) but the parts in `taken`,
    /// which waiting reads have; the oldest chunks go when over capacity.
    mutating func keep(_ bytes: UnsafeRawBufferPointer, at start: Int64, except taken: ByteRangeSet) {
        let whole = start..<(start + Int64(bytes.count))
        for part in taken.missing(in: whole) {
            let from = Int(part.lowerBound - start)
            let piece = [UInt8](UnsafeRawBufferPointer(rebasing: bytes[from..<from + Int(part.count)]))
            guard piece.count <= Self.capacity else { continue }
            chunks.append((part.lowerBound, piece))
            count += piece.count
        }
        while count > Self.capacity, let oldest = chunks.first {
            count -= oldest.bytes.count
            chunks.removeFirst()
        }
    }

    /// Copies what it has of `range` into `buffer` (which holds `range`
    /// from its start) and forgets it: a stream does not read twice, and
    /// the kernel's pages serve a read again. Returns the ranges copied.
    mutating func take(_ range: Range<Int64>, into buffer: UnsafeMutableRawBufferPointer) -> [Range<Int64>] {
        var copied: [Range<Int64>] = []
        var kept: [(start: Int64, bytes: [UInt8])] = []
        for chunk in chunks {
            let span = chunk.start..<(chunk.start + Int64(chunk.bytes.count))
            guard span.overlaps(range) else {
                kept.append(chunk)
                continue
            }
            let overlap = span.clamped(to: range)
            chunk.bytes.withUnsafeBytes { source in
                let from = source.baseAddress! + Int(overlap.lowerBound - span.lowerBound)
                (buffer.baseAddress! + Int(overlap.lowerBound - range.lowerBound)).copyMemory(from: from,
                                                                                              byteCount: Int(overlap.count))
            }
            copied.append(overlap)
            count -= chunk.bytes.count
            // What lies outside the read stays for the next one.
            if span.lowerBound < overlap.lowerBound {
                kept.append((span.lowerBound, Array(chunk.bytes[..<Int(overlap.lowerBound - span.lowerBound)])))
                count += kept.last!.bytes.count
            }
            if overlap.upperBound < span.upperBound {
                kept.append((overlap.upperBound, Array(chunk.bytes[Int(overlap.upperBound - span.lowerBound)...])))
                count += kept.last!.bytes.count
            }
        }
        chunks = kept
        return copied
    }

    /// Forgets everything (another version, a purge, the last close).
    mutating func clear() {
        chunks = []
        count = 0
    }
}
