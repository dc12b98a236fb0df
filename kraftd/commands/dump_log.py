"""`kraftd dump-log PATH…`: print the batches (and records) of segment or snapshot files,
in the spirit of kafka-dump-log. A torn or corrupt tail is reported, not fatal."""
from __future__ import annotations

import argparse
import sys


def register(subparsers) -> None:
    p = subparsers.add_parser("dump-log", help="print the record batches of .log / .checkpoint files")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--records", action="store_true", help="also print every record")
    p.add_argument("--print-data", action="store_true", help="also print keys, values and headers")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    status = 0
    try:
        for path in args.paths:
            status |= dump(path, args.records or args.print_data, args.print_data, sys.stdout)
    except BrokenPipeError:  # e.g. piped into `head`
        sys.stderr.close()
    return status


def dump(path: str, records: bool, data: bool, out) -> int:
    from kraftd.protocol.control_records import ControlType, parse_control_record_key
    from kraftd.protocol.records import BATCH_HEADER_SIZE, crc_ok, decode_records, parse_batch_header

    with open(path, "rb") as f:
        buf = f.read()
    out.write(f"Dumping {path}\n")
    pos, status = 0, 0
    while pos < len(buf):
        if len(buf) - pos < BATCH_HEADER_SIZE:
            out.write(f"Torn tail: {len(buf) - pos} bytes at position {pos}\n")
            return 1
        h = parse_batch_header(buf, pos)
        if pos + h.size > len(buf):
            out.write(f"Torn tail: batch at position {pos} claims {h.size} bytes, {len(buf) - pos} present\n")
            return 1
        valid = crc_ok(buf, pos, h)
        out.write(
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
            f"partitionLeaderEpoch: {h.partition_leader_epoch} isTransactional: {str(h.is_transactional).lower()} "
            f"isControl: {str(h.is_control).lower()} position: {pos} "
            f"{'LogAppendTime' if h.timestamp_type else 'CreateTime'}: {h.max_timestamp} size: {h.size} "
            f"magic: {h.magic} compresscodec: {h.compression.name.lower()} crc: {h.crc} "
            f"isvalid: {str(valid).lower()}\n")
        if not valid:
            status = 1
        elif records:
            for r in decode_records(memoryview(buf)[pos:pos + h.size], h):
                line = (f"| offset: {r.offset} {'LogAppendTime' if h.timestamp_type else 'CreateTime'}: "
                        f"{r.timestamp} keySize: {field_size(r.key)} valueSize: {field_size(r.value)} "
                        f"headerKeys: [{','.join(k for k, _ in r.headers)}]")
                if h.is_control:
                    _, control_type = parse_control_record_key(r.key)
                    name = ControlType(control_type).name if control_type in iter(ControlType) else "UNKNOWN"
                    line += f" controlType: {name}({control_type})"
                elif data:
                    line += f" key: {printable(r.key)} payload: {printable(r.value)}"
                out.write(line + "\n")
        pos += h.size
    return status


def field_size(value) -> int:
    return -1 if value is None else len(value)


def printable(value) -> str:
    if value is None:
        return "null"
    return bytes(value).decode("utf-8", errors="backslashreplace")
