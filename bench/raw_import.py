"""The raw reference of `import_bench.py`: a JSONL export imported with no journal at all.

A streaming orjson parse of each line after the header, the sha256 chain of each record's
canonical bytes (orjson with sorted keys, without ``hash``) checked against its ``hash``,
and an ``executemany`` of the same rows into a bare table of the events table's shape, in
batches of 1000, in one transaction. What an import cannot do with less.

    python bench/raw_import.py EXPORT.jsonl NEW.db
"""

import hashlib
import sqlite3
import sys

import orjson

INSERT = "INSERT INTO events(session_id, seq, ts, type, v, body, hash) VALUES (?,?,?,?,?,?,?)"


def main(path: str, db: str) -> None:
    conn = sqlite3.connect(db)
    conn.execute(
        "CREATE TABLE events (pos INTEGER PRIMARY KEY, session_id TEXT, seq INTEGER, "
        "ts TEXT, type TEXT, v INTEGER, body TEXT, hash TEXT, UNIQUE(session_id, seq))"
    )
    chain, batch = "0" * 64, []
    with conn, open(path, "rb") as lines:
        next(lines)
        for line in lines:
            record = orjson.loads(line)
            claimed = record.pop("hash")
            body = orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
            digest = hashlib.sha256(chain.encode("ascii"))
            digest.update(body)
            chain = digest.hexdigest()
            if chain != claimed:
                raise SystemExit(f"{path}: seq {record['seq']}: hash does not match")
            row = (record["session_id"], record["seq"], record["ts"], record["type"])
            batch.append((*row, record["v"], body.decode(), chain))
            if len(batch) == 1000:
                conn.executemany(INSERT, batch)
                batch.clear()
        conn.executemany(INSERT, batch)
    conn.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
