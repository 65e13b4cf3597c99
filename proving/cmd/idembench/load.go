package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Loading rows: the keys are the hex MD5 of a number, 32 bytes that look
// random, like the UUIDs real clients send. Live rows expire a day from
// now; expired rows expired long ago.
func times(expired bool) (created, expires int64) {
	now := time.Now().UnixMicro()
	if expired {
		return 1, 2
	}
	return now, now + (24 * time.Hour).Microseconds()
}

const loadChunk = 500_000

func loadPostgres(ctx context.Context, db *sql.DB, table string, n int, expired bool) error {
	created, expires := times(expired)
	for lo := 1; lo <= n; lo += loadChunk {
		hi := min(n, lo+loadChunk-1)
		q := fmt.Sprintf(`INSERT INTO %s (key, request_hash, created_at, expires_at, status, header, body, checksum)
SELECT convert_to(md5(i::text), 'UTF8'), '\x00'::bytea, %d, %d + i, 201, '\x'::bytea, '\x7b7d'::bytea, '\x00'::bytea
FROM generate_series(%d, %d) AS i`, `"`+table+`"`, created, expires, lo, hi)
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	if _, err := db.ExecContext(ctx, `VACUUM ANALYZE "`+table+`"`); err != nil {
		return err
	}
	// Write the load out now, so that the measurement that follows does
	// not share the machine with a checkpoint of a gigabyte of pages, as a
	// table that has grown over a day would not. It needs a superuser or
	// pg_checkpoint, as the DSN of scripts/test has.
	_, err := db.ExecContext(ctx, `CHECKPOINT`)
	return err
}

// loadMariaDB inserts the rows in the order of their keys, in one
// statement: InnoDB clusters rows by primary key, and random-order inserts
// into a table larger than the buffer pool would spend their time on random
// page reads.
func loadMariaDB(ctx context.Context, db *sql.DB, table string, n int, expired bool) error {
	created, expires := times(expired)
	q := fmt.Sprintf("INSERT INTO `%s` (`key`, request_hash, token, created_at, expires_at, status, header, body, checksum) "+
		"SELECT MD5(seq) AS k, 0x00, seq, %d, %d + seq, 201, '', '{}', 0x00 FROM seq_1_to_%d ORDER BY k", table, created, expires, n)
	if _, err := db.ExecContext(ctx, q); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, "ANALYZE TABLE `"+table+"`")
	return err
}

// loadMySQL is loadMariaDB for MySQL, which has no sequence tables: a
// recursive CTE counts instead, on a connection allowed to recurse n deep.
// Its keys are the first 32 hex digits of SHA-256, as the server used here
// has no MD5, and look the same.
func loadMySQL(ctx context.Context, db *sql.DB, table string, n int, expired bool) error {
	created, expires := times(expired)
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION cte_max_recursion_depth = %d", n+1)); err != nil {
		return err
	}
	q := fmt.Sprintf("INSERT INTO `%s` (`key`, request_hash, token, created_at, expires_at, status, header, body, checksum) "+
		"WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < %d) "+
		"SELECT LEFT(SHA2(i, 256), 32) AS k, 0x00, i, %d, %d + i, 201, '', '{}', 0x00 FROM seq ORDER BY k", table, n, created, expires)
	if _, err := conn.ExecContext(ctx, q); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, "ANALYZE TABLE `"+table+"`")
	return err
}

func loadSQLite(ctx context.Context, db *sql.DB, table string, n int, expired bool) error {
	created, expires := times(expired)
	for lo := 1; lo <= n; lo += loadChunk {
		hi := min(n, lo+loadChunk-1)
		q := fmt.Sprintf(`WITH RECURSIVE s(i) AS (SELECT %d UNION ALL SELECT i + 1 FROM s WHERE i < %d)
INSERT INTO "%s" (key, request_hash, created_at, expires_at, status, header, body, checksum)
SELECT CAST(hex(randomblob(16)) AS BLOB), x'00', %d, %d + i, 201, x'', x'7b7d', x'00' FROM s`, lo, hi, table, created, expires)
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}
