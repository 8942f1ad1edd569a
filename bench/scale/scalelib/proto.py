"""etcd v3 gRPC messages without generated stubs: hand-encoded protobuf, the few fields used.

A RangeRequest is one bytes field (key = 1); replies are read with pb_fields.
"""


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def range_request(key):
    return b"\x0a" + varint(len(key)) + key  # serializable (7) unset: linearizable


def field(num, payload):
    """A length-delimited protobuf field."""
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def pb_fields(buf):
    """(field number, value) of a protobuf message: ints for varints, bytes for the rest."""
    i, n = 0, len(buf)
    while i < n:
        tag, i = _read_varint(buf, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = _read_varint(buf, i)
        elif wt == 2:
            ln, i = _read_varint(buf, i)
            v, i = buf[i:i + ln], i + ln
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        yield num, v


def _read_varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def put_request(key, value, lease=0):
    """PutRequest{key 1, value 2, lease 3}."""
    return field(1, key) + field(2, value) + (varint(3 << 3) + varint(lease) if lease else b"")


def prefix_end(prefix):
    """The range_end that makes a request cover every key with this prefix."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


def range_count_request(key, range_end, revision=0):
    """RangeRequest{key 1, range_end 2, revision 4, count_only 9}: linearizable, count only."""
    rev = varint(4 << 3) + varint(revision) if revision else b""
    return field(1, key) + field(2, range_end) + rev + varint(9 << 3) + varint(1)


def range_at_request(key, revision):
    """RangeRequest{key 1, revision 4} (0: the head), linearizable."""
    return field(1, key) + (varint(4 << 3) + varint(revision) if revision else b"")


def range_count(resp):
    """RangeResponse.count (4)."""
    return dict(pb_fields(resp)).get(4, 0)


def lease_grant_request(ttl_s):
    return varint(1 << 3) + varint(ttl_s)  # LeaseGrantRequest{TTL 1}


def lease_id(resp):
    return dict(pb_fields(resp)).get(2, 0)  # LeaseGrantResponse{ID 2}


def compaction_request(revision, physical):
    """CompactionRequest{revision 1, physical 2}."""
    return varint(1 << 3) + varint(revision) + (varint(2 << 3) + varint(1) if physical else b"")


def header_revision(resp):
    """ResponseHeader.revision (3) of a reply whose header is field 1."""
    for num, v in pb_fields(resp):
        if num == 1:
            return dict(pb_fields(v)).get(3, 0)
    return 0


def watch_create_request(key, range_end=b""):
    """WatchRequest.create_request{key 1, range_end 2}."""
    return field(1, field(1, key) + (field(2, range_end) if range_end else b""))


def watch_events(buf):
    """[(type (0 put, 1 delete), key, mod_revision)] of a WatchResponse."""
    events = []
    for num, v in pb_fields(buf):
        if num == 11:  # mvccpb.Event{type 1, kv 2}
            ev = dict(pb_fields(v))
            kv = dict(pb_fields(ev.get(2, b"")))
            events.append((ev.get(1, 0), kv.get(1, b""), kv.get(3, 0)))
    return events


def watch_response(buf):
    """(created, canceled, [(key, mod_revision)]) of a WatchResponse."""
    created = canceled = False
    events = []
    for num, v in pb_fields(buf):
        if num == 3:
            created = bool(v)
        elif num == 4:
            canceled = bool(v)
        elif num == 11:  # mvccpb.Event{type 1, kv 2}
            for en, ev in pb_fields(v):
                if en == 2:
                    kv = dict(pb_fields(ev))
                    events.append((kv.get(1, b""), kv.get(3, 0)))
    return created, canceled, events

