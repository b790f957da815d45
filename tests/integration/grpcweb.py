"""gRPC-web over HTTP/1.1 with the protobuf wire format written and read by hand: enough to
call Parca's API from the tests and to read what lockscoped sends it, without generated
code. A message is built with field() and read with parse(); frames are a flag byte (0x80:
trailers), a big-endian length and the message."""
import struct
import urllib.request

TRAILERS = 0x80


def varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, value):
    """One field: an int as a varint, str/bytes length-delimited (an embedded message too)."""
    if isinstance(value, bool) or isinstance(value, int):
        return varint(num << 3) + varint(int(value))
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value


def timestamp(num, seconds):
    """A google.protobuf.Timestamp field."""
    return field(num, field(1, int(seconds)))


def parse(buf):
    """One message as {field number: [values]}: ints for varints, bytes otherwise."""
    out, i = {}, 0

    def read_varint(i):
        n = shift = 0
        while True:
            b = buf[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return n, i

    while i < len(buf):
        key, i = read_varint(i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = read_varint(i)
        elif wire == 2:
            n, i = read_varint(i)
            v, i = bytes(buf[i:i + n]), i + n
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            v, i = bytes(buf[i:i + n]), i + n
        else:
            raise ValueError(f"wire type {wire} at {i}")
        out.setdefault(num, []).append(v)
    return out


def frame(msg, flag=0):
    return bytes([flag]) + struct.pack(">I", len(msg)) + msg


def frames(body):
    """[(flag, payload)] of a gRPC-web body."""
    out, i = [], 0
    while i < len(body):
        n = struct.unpack(">I", body[i + 1:i + 5])[0]
        out.append((body[i], body[i + 5:i + 5 + n]))
        i += 5 + n
    return out


def call(base, method, msg, timeout=30):
    """Calls /METHOD (package.Service/Method) at @base; returns the reply's messages.
    A status other than OK raises RuntimeError with it."""
    req = urllib.request.Request(f"{base}/{method}", data=frame(msg),
                                 headers={"Content-Type": "application/grpc-web+proto", "X-Grpc-Web": "1"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        body, status, message = r.read(), r.headers.get("Grpc-Status"), r.headers.get("Grpc-Message")
    msgs = []
    for flag, payload in frames(body):
        if flag & TRAILERS:
            for line in payload.decode().split("\r\n"):
                k, _, v = line.partition(":")
                if k.strip().lower() == "grpc-status":
                    status = v.strip()
                elif k.strip().lower() == "grpc-message":
                    message = v.strip()
        else:
            msgs.append(payload)
    if status != "0":
        raise RuntimeError(f"{method}: gRPC status {status}: {message}")
    return msgs
