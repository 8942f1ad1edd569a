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


def put_request(key, value):
    return field(1, key) + field(2, value)


def header_revision(resp):
    """ResponseHeader.revision (3) of a reply whose header is field 1."""
    for num, v in pb_fields(resp):
        if num == 1:
            return dict(pb_fields(v)).get(3, 0)
    return 0


def watch_create_request(key):
    return field(1, field(1, key))  # WatchRequest.create_request{key}


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

