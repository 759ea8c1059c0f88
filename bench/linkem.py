#!/usr/bin/env python3
"""A link emulator for the bench: a TCP proxy on 127.0.0.1 that adds a one-way
delay in each direction and paces all downstream bytes through one shared rate,
so every client behind it sees the same round trip time and shares one link.

    python3 bench/linkem.py --upstream 127.0.0.1:8080 --delay-ms 50 --rate-mbit 50 [--port 0]
                            [--slow-start] [--fifo-ms MS]

Prints the listening port on the first line of stdout, then serves until
SIGTERM/SIGINT or until --lifetime seconds have passed. Python 3 standard
library only (asyncio, one thread).

The model (see bench/README.md, "WAN scenarios"):
- A byte the client sends reaches the server `delay` later, and a byte the
  server sends reaches the client `delay` after it leaves the bottleneck, so a
  request/response costs 2 × delay more than on loopback.
- Connection setup costs one round trip: the kernel completes the client's
  connect() at once, so the client's first bytes are held as if they had been
  sent when the SYN-ACK would have arrived (accept + 2 × delay).
- Downstream bytes of all connections leave through one FIFO pacer at `rate`
  (a token bucket one chunk deep: a link has no burst above its rate). Each
  connection holds at most one chunk waiting for the pacer and at most
  IN_FLIGHT_CAP bytes on the delay line, so backpressure reaches the server's
  socket as on a real link, and nginx's $body_bytes_sent stays honest.
- With --slow-start (the "slow start" model; without it, the "paced" one):
  each connection's downstream bytes are also bounded by a congestion window,
  as the server's TCP would bound them. A new connection starts at
  INIT_WINDOW (10 segments of 1460 bytes, RFC 6928); each byte acknowledged
  grows the window by a byte, so it doubles each round trip until the link's
  rate is the bound; an acknowledgment reaches the sender one round trip
  after its byte left the bottleneck. After an idle spell longer than the RTO
  (--rto-ms; default RTT + 200 ms, Linux's minimum RTO over its smoothed
  RTT) with nothing in flight, the window drops back to the initial window
  (RFC 5681 4.1; Linux halves it per RTO idle, down to the same floor).
- Queues: by default each connection keeps one chunk waiting for the pacer
  and they take turns (per-connection queues, as fair queueing would);
  with --fifo-ms MS they share one FIFO queue holding up to MS of the link's
  time, so a connection's bytes wait behind what others queued before them.
- Not modelled: loss, an upstream rate cap, slow start of the upstream
  direction (requests are far below one window).

Round trips (--requests-log FILE): each HTTP/1.1 request the client sends
(a head ending in a blank line; GET and HEAD carry no body) is one JSON line
when the emulator reads it, and one more when the first byte of its answer
reaches the client. `rounds()` counts the waves: a request sent after an
answer of the current wave reached the client may have waited on it, so it
starts a new wave; one sent before is in the same wave. The count is an
upper bound on the chain of answers the client waited on, and it does not
depend on the machine's speed as long as the delay dwarfs its jitter.
For a protocol that is not HTTP (SSH), --sends-log logs every read of the
client's bytes as a "request" (its line: how many bytes), answered by the
first bytes that reach the client of those the emulator read from the
server after the send was delivered to it: bytes already on their way (a
stream's tail, a window's worth asked before) answer no later send, so a
send made while they arrive is no wait of its own. `rounds()` then counts
the client's waits on the server, one a wave, whatever the protocol says.
The emulator reads the server at once when the link has no rate (the
tests' way); behind a rate the server's socket holds bytes it sent before,
and an answer may then be taken early.
"""
import argparse
import asyncio
import collections
import itertools
import json
import os
import signal
import sys

CHUNK = 16 * 1024              # read size: the pacer's granularity (0.65 ms at 200 Mbit/s)
IN_FLIGHT_CAP = 4 * 1024 * 1024  # bytes one direction may hold on the delay line (a receive window)
PACER_LEAD = 0.004             # s: a connection queues its next chunk this long before the link frees
SEGMENT = 1460                 # bytes: an Ethernet path's TCP segment (MSS)
INIT_WINDOW = 10 * SEGMENT     # a new connection's congestion window (RFC 6928, Linux's default)
RTO_FLOOR = 0.2                # s: Linux's minimum RTO, over the smoothed RTT


class Link:
    """The shared bottleneck: the time at which it is next free."""

    def __init__(self, rate_bytes_per_s):
        self.rate = rate_bytes_per_s
        self.free_at = 0.0

    def reserve(self, now, nbytes):
        """The time the last of `nbytes` leaves the bottleneck, queued after everything reserved before."""
        if self.rate is None:
            return now
        start = max(now, self.free_at)
        self.free_at = start + nbytes / self.rate
        return self.free_at


class Window:
    """The congestion window of one connection's downstream sender under the
    slow-start model: bytes may leave while `in_flight` < `cwnd`; each byte
    acknowledged (one round trip after it left) adds one byte to the window,
    so it doubles each round trip; after an idle spell longer than `rto`
    with nothing in flight it is back at the initial window (RFC 5681 4.1).
    Times are the caller's: the class does no I/O, so its arithmetic is
    testable without a clock."""

    def __init__(self, rto, init=INIT_WINDOW, cap=IN_FLIGHT_CAP):
        self.init, self.rto, self.cap = init, rto, cap
        self.cwnd = init
        self.in_flight = 0
        self.acks = collections.deque()  # (time the ack reaches the sender, bytes), in order
        self.last_send = None

    def allowance(self, now):
        """Bytes that may leave at `now`: the window less what is in flight."""
        while self.acks and self.acks[0][0] <= now:
            _, n = self.acks.popleft()
            self.in_flight -= n
            # Slow start: never left here (no loss is modelled); the
            # receive window (cap) is the ceiling, the pacer the link's rate.
            self.cwnd = min(self.cwnd + n, self.cap)
        if not self.in_flight and self.last_send is not None and now - self.last_send > self.rto:
            self.cwnd = min(self.cwnd, self.init)
        return self.cwnd - self.in_flight

    def next_ack(self):
        return self.acks[0][0] if self.acks else None

    def sent(self, now, nbytes, acked_at):
        self.in_flight += nbytes
        self.acks.append((acked_at, nbytes))
        self.last_send = now


class DelayLine:
    """One direction of one connection: chunks delivered to `writer` in order,
    each no earlier than its due time. None is the end of the stream;
    on_done(failed) runs when the line stops."""

    def __init__(self, loop, writer, on_done, on_deliver=None):
        self.loop = loop
        self.writer = writer
        self.on_done = on_done
        self.on_deliver = on_deliver
        self.queue = collections.deque()
        self.queued_bytes = 0
        self.wakeup = asyncio.Event()
        self.room = asyncio.Event()
        self.room.set()
        self.task = loop.create_task(self.run())

    def put(self, due, data, tag=None):
        """`tag` is handed to on_deliver(now, tag) with the chunk."""
        self.queue.append((due, data, tag))
        if data:
            self.queued_bytes += len(data)
            if self.queued_bytes >= IN_FLIGHT_CAP:
                self.room.clear()
        self.wakeup.set()

    async def run(self):
        failed = False
        try:
            while True:
                while not self.queue:
                    self.wakeup.clear()
                    await self.wakeup.wait()
                due, data, tag = self.queue[0]
                wait = due - self.loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                self.queue.popleft()
                if data is None:
                    if self.writer.can_write_eof():
                        self.writer.write_eof()
                    break
                self.writer.write(data)
                if self.on_deliver:
                    self.on_deliver(self.loop.time(), tag)
                await self.writer.drain()
                self.queued_bytes -= len(data)
                if self.queued_bytes < IN_FLIGHT_CAP:
                    self.room.set()
        except (ConnectionError, OSError):
            failed = True
        finally:
            self.on_done(failed)


class RequestLog:
    """The requests of one connection as the client sent them, appended to
    `path` as JSON lines: {"id", "conn", "sent", "line", "range"} when read,
    {"id", "answered"} when the first byte of the answer reached the client.
    HTTP/1.1 without pipelining (curl's way): an answer belongs to the last
    request of its connection. Raw (--sends-log): every send is a request,
    answered by the first bytes read from the server after it was delivered."""
    ids = itertools.count(1)

    def __init__(self, out, conn, raw=False):
        self.out = out
        self.conn = conn
        self.raw = raw      # every read of the client's bytes is a request
        self.head = b""
        self.last = None    # (id, answered?)
        self.delivered = []  # raw: (id, delivered to the server at), unanswered

    def client_sent(self, now, data):
        """Returns the send's id in raw mode (the tag of its chunk)."""
        if self.out is None:
            return None
        if self.raw:
            if data:
                rid = next(self.ids)
                self.write({"id": rid, "conn": self.conn, "sent": now, "line": f"{len(data)} bytes", "range": None})
                return rid
            return None
        self.head += data
        while b"\r\n\r\n" in self.head:
            head, _, self.head = self.head.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            rng = next((h.split(":", 1)[1].strip() for h in lines[1:] if h.lower().startswith("range:")), None)
            rid = next(self.ids)
            self.last = [rid, False]
            self.write({"id": rid, "conn": self.conn, "sent": now, "line": lines[0], "range": rng})
        if len(self.head) > 65536:  # not HTTP: stop looking
            self.out = None

    def server_sends(self, window):
        """The first bytes of an answer leave the server: with the slow-start
        model, the sender's window at that moment (counts for the tests)."""
        if self.out is not None and self.last is not None and len(self.last) == 2:
            self.last.append(window)
            self.write({"id": self.last[0], "window": window})

    def server_got(self, now, rid):
        """A raw send's bytes were delivered to the server."""
        if self.raw and rid is not None:
            self.delivered.append((rid, now))

    def client_got(self, now, read_at=None):
        """Bytes reached the client; `read_at`: when the emulator read them
        from the server."""
        if self.raw:
            if self.out is not None and read_at is not None:
                answered = [rid for rid, at in self.delivered if at <= read_at]
                self.delivered = [(rid, at) for rid, at in self.delivered if at > read_at]
                for rid in answered:
                    self.write({"id": rid, "answered": now})
            return
        if self.last is not None and not self.last[1]:
            self.last[1] = True
            self.write({"id": self.last[0], "answered": now})

    def write(self, record):
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()


def read_requests(path):
    """The requests a --requests-log holds, each a dict with "answered"
    (None: no answer reached the client) and, under the slow-start model,
    "window" (the sender's congestion window in bytes when its answer's
    first byte left the server), in the order they were sent."""
    by_id = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if "sent" in rec:
                by_id[rec["id"]] = dict(rec, answered=None)
            elif rec["id"] in by_id:
                by_id[rec["id"]].update((k, v) for k, v in rec.items() if k != "id")
    return sorted(by_id.values(), key=lambda r: r["sent"])


def rounds(requests):
    """The waves of `requests` (read_requests): a request sent after an
    answer of the current wave had reached the client starts the next."""
    count, frontier = 0, None
    for r in sorted(requests, key=lambda r: r["sent"]):
        answered = r["answered"] if r["answered"] is not None else float("inf")
        if frontier is None or r["sent"] >= frontier:
            count, frontier = count + 1, answered
        else:
            frontier = min(frontier, answered)
    return count


class Proxy:
    def __init__(self, upstream, delay_s, rate_bytes_per_s, requests_log=None, slow_start=False, rto_s=None,
                 fifo_s=None, raw_log=False):
        self.upstream = upstream
        self.delay = delay_s
        self.link = Link(rate_bytes_per_s)
        self.slow_start = slow_start
        self.rto = rto_s if rto_s is not None else 2 * delay_s + RTO_FLOOR
        self.fifo = fifo_s  # None: per-connection queues
        self.connections = set()
        self.requests_log = requests_log
        self.raw_log = raw_log
        self.conn_ids = itertools.count(1)

    async def handle(self, c_reader, c_writer):
        loop = asyncio.get_running_loop()
        accepted = loop.time()
        try:
            s_reader, s_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            c_writer.close()
            return
        done = asyncio.Event()
        log = RequestLog(self.requests_log, next(self.conn_ids), raw=self.raw_log)
        # The client closing ends the exchange once its close has crossed the
        # link (the server then sees a reset, as when a real client closes
        # mid-response); a failed write to the client ends it at once.
        up = DelayLine(loop, s_writer, lambda failed: done.set(), on_deliver=log.server_got)
        down = DelayLine(loop, c_writer, lambda failed: failed and done.set(), on_deliver=log.client_got)
        conn = (c_writer, s_writer, done)
        self.connections.add(conn)
        pumps = [loop.create_task(self.pump_up(c_reader, up, accepted, log)),
                 loop.create_task(self.pump_down(s_reader, down, log))]
        try:
            await done.wait()
        except asyncio.CancelledError:
            pass  # the proxy is stopping
        finally:
            for t in pumps + [up.task, down.task]:
                t.cancel()
            for w in (c_writer, s_writer):
                w.transport.abort()
            self.connections.discard(conn)

    def close_all(self):
        """Close every connection, as a server's keep-alive timeout closes
        idle ones (the client sees the end of its stream); returns how many.
        The bench sends SIGUSR1 for this only when no transfer is running."""
        for c_writer, s_writer, done in list(self.connections):
            c_writer.close()
            s_writer.close()
            done.set()
        return len(self.connections)

    async def pump_up(self, reader, line, accepted, log):
        loop = asyncio.get_running_loop()
        # The client's first bytes cannot leave before the handshake's round trip.
        sent_floor = accepted + 2 * self.delay
        try:
            while True:
                data = await reader.read(CHUNK)
                rid = log.client_sent(loop.time(), data)
                line.put(max(loop.time(), sent_floor) + self.delay, data or None, rid)
                if not data:
                    return
                await line.room.wait()
        except (ConnectionError, OSError):
            line.put(loop.time() + self.delay, None)

    async def pump_down(self, reader, line, log):
        loop = asyncio.get_running_loop()
        window = Window(self.rto) if self.slow_start else None
        try:
            while True:
                data = await reader.read(CHUNK)
                read_at = loop.time()
                if not data:
                    line.put(loop.time() + self.delay, None)
                    return
                if window is not None:
                    window.allowance(loop.time())  # acks in, restart after idle applied
                    log.server_sends(window.cwnd)
                while data:
                    piece = data
                    if window is not None:
                        room = window.allowance(loop.time())
                        if room <= 0:
                            # Wait for the next acknowledgment to open the window.
                            await asyncio.sleep(max(0.0, window.next_ack() - loop.time()))
                            continue
                        piece = data[:room]
                    data = data[len(piece):]
                    now = loop.time()
                    leaves = self.link.reserve(now, len(piece))
                    if window is not None:
                        window.sent(now, len(piece), leaves + 2 * self.delay)
                    line.put(leaves + self.delay, piece, read_at)
                    if self.fifo is None:
                        # Read the next chunk just before this one has left
                        # the bottleneck: the server's socket then fills as it
                        # would behind a real link, connections share the pacer
                        # in turn, and a lone connection keeps the link busy
                        # despite the timer's slack.
                        wait = leaves - loop.time() - PACER_LEAD
                    else:
                        # One shared FIFO: queue behind everyone while it
                        # holds less than its size of the link's time.
                        wait = self.link.free_at - self.fifo - loop.time()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    await line.room.wait()
        except (ConnectionError, OSError):
            line.put(loop.time() + self.delay, None)


async def serve(args):
    host, _, port = args.upstream.rpartition(":")
    rate = args.rate_mbit * 1e6 / 8 if args.rate_mbit else None
    if args.requests_log and args.sends_log:
        sys.exit("linkem: --requests-log and --sends-log are one or the other")
    log_path = args.requests_log or args.sends_log
    requests_log = open(log_path, "a") if log_path else None
    proxy = Proxy((host or "127.0.0.1", int(port)), args.delay_ms / 1000, rate, requests_log,
                  slow_start=args.slow_start, rto_s=None if args.rto_ms is None else args.rto_ms / 1000,
                  fifo_s=args.fifo_ms / 1000 if args.fifo_ms else None, raw_log=bool(args.sends_log))
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", args.port, backlog=1024)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # SIGUSR1: close every connection, then say how many on stdout.
    loop.add_signal_handler(signal.SIGUSR1, lambda: print(f"closed {proxy.close_all()}", flush=True))
    if args.lifetime:
        loop.call_later(args.lifetime, stop.set)
    # Stop with the parent too: the bench holds our stdin open while it lives.
    if args.stdin_watch:
        loop.add_reader(sys.stdin.fileno(), lambda: os.read(sys.stdin.fileno(), 4096) or stop.set())
    # The port last: the bench may signal as soon as it has read it.
    print(server.sockets[0].getsockname()[1], flush=True)
    await stop.wait()
    server.close()
    for c_writer, s_writer, _ in list(proxy.connections):
        c_writer.transport.abort()
        s_writer.transport.abort()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--upstream", required=True, help="HOST:PORT to forward to")
    p.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay, each direction (RTT = 2×)")
    p.add_argument("--rate-mbit", type=float, default=0.0,
                   help="downstream rate shared by all connections, Mbit/s (0: unlimited)")
    p.add_argument("--port", type=int, default=0, help="port to listen on (0: any free one)")
    p.add_argument("--lifetime", type=float, default=3600.0, help="exit after this many seconds (0: never)")
    p.add_argument("--stdin-watch", action="store_true", help="exit when stdin reaches end of file")
    p.add_argument("--requests-log", metavar="FILE",
                   help="append each request and the arrival of its answer as JSON lines (for rounds())")
    p.add_argument("--sends-log", metavar="FILE",
                   help="as --requests-log, for any protocol: each read of the client's bytes is a request, "
                        "answered by the first bytes read from the server after it was delivered there")
    p.add_argument("--slow-start", action="store_true",
                   help="the slow-start model: a congestion window per connection, 10 segments at first, doubling "
                        "each round trip; back to 10 after an idle spell longer than the RTO")
    p.add_argument("--rto-ms", type=float, help="the RTO of --slow-start's restart after idle (default RTT + 200)")
    p.add_argument("--fifo-ms", type=float, default=0.0,
                   help="one shared FIFO bottleneck queue of this many ms of the link's time "
                        "(0: per-connection queues taking turns)")
    args = p.parse_args()
    if args.delay_ms < 0 or args.rate_mbit < 0 or args.lifetime < 0 or args.fifo_ms < 0 or (args.rto_ms or 0) < 0:
        p.error("--delay-ms, --rate-mbit, --lifetime, --rto-ms and --fifo-ms must be ≥ 0")
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
