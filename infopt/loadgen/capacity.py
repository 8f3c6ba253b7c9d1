"""What lets one client process hold many concurrent streams (1,000 and more).

Open files: every stream is a socket, one file descriptor. `ensure_open_files(n)` raises the
soft RLIMIT_NOFILE to the hard limit when n streams (plus a margin for the interpreter, logs
and parquet files) need more than the soft limit allows, which is often 1,024; past the hard
limit it raises `StreamLimitError`, saying what to change, before any request is sent, rather
than letting a share of the requests fail with "Too many open files".

Connection pools: httpcore 1.0.x, under httpx, walks every pooled connection on every request
start and every response close (polling each idle socket), and for each idle connection counts
all of them again (encode/httpcore#1035, open and unreleased as of httpcore 1.0.9): O(n^2) per
event in n connections. Measured here (2 shared cores, one pool of 1,000 connections): 1,000
streams of 10 chunks took 58 s, nearly all of it in that walk, and the event loop stalled for up
to 49 s, long enough for idle connections to pass httpx's 5 s keep-alive expiry and be opened
again. `pool_shards(n)` spreads the streams over AsyncClients of at most POOL_STREAMS
connections each, so the walk is bounded by the shard, not by n: the same 1,000 streams then
took 3.6 s (32 per pool), and the client's CPU per request is the same at 1,000 streams as at 32.
"""

from __future__ import annotations

import math
import resource

from infopt.specs.base import InputError

# Streams per httpx pool. Client CPU for 3,000 requests of 10 chunks over 1,000 streams (this
# machine, 2 cores): 4.7 s with a pool per stream, 5.0 s at 4, 5.5 s at 8, 7.7 s at 32. Each
# AsyncClient costs ~14 KB (they share one TLS context), so 4 keeps 1,000 streams at 250 of them.
POOL_STREAMS = 4
# File descriptors the process needs besides its streams (stdio, the interpreter's modules and
# pipes, an engine log, a parquet file, the event loop's selector).
FD_MARGIN = 64


class StreamLimitError(InputError):
    """This process may not open as many sockets as the load asks for."""


def pool_shards(streams: int) -> int:
    """How many httpx clients carry `streams` concurrent streams (each at most POOL_STREAMS)."""
    return max(1, math.ceil(streams / POOL_STREAMS))


def ensure_open_files(streams: int) -> int:
    """Make room for `streams` concurrent sockets in this process: raise the soft open-files
    limit (up to the hard one) if needed. Returns the soft limit in force afterwards."""
    need = streams + FD_MARGIN
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return soft if soft != resource.RLIM_INFINITY else need
    if hard != resource.RLIM_INFINITY and hard < need:
        raise StreamLimitError(
            f"{streams} concurrent streams need about {need} open files, but this process may "
            f"open at most {hard} (hard RLIMIT_NOFILE): raise it (`ulimit -Hn {need}` as root, "
            f"LimitNOFILE= in a systemd unit, nofile in /etc/security/limits.conf, "
            f"--ulimit nofile={need}:{need} for docker) or lower the concurrency to "
            f"{max(1, hard - FD_MARGIN)} or less")
    target = hard if hard != resource.RLIM_INFINITY else need
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target
