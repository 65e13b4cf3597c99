package dialect_test

import (
	"context"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestPostgresPairLockMatchesGo derives the lock of many records of
// tables with a shard column of each kind twice, as the claim takes it
// (from {lock_id}, dialect.LockID of ShardKind.LockBytes, which the Store
// binds) and as the PostgreSQL dialect's Purge computes it in SQL from the
// row, and wants them equal: a purge that derived another number would
// take a lock that no claim holds, and delete a record that a claim is
// taking over. Both expressions are read from the dialect's own
// statements, as a Store of the table runs them.
func TestPostgresPairLockMatchesGo(t *testing.T) {
	dbtest.ForEach(t, dbtest.ServerTargets(), func(t *testing.T, tg dbtest.Target) {
		if tg.Family != "postgres" {
			t.Skip("the lock number derived in SQL is the PostgreSQL dialect's")
		}
		db := tg.Open(t)
		ctx := context.Background()
		for kind, values := range shardValues() {
			e := dbtest.Setup(t, tg.Dialect, db, idem.WithShardColumn(kind))
			d := tg.Dialect.(dialect.ShardColumn)
			st := d.ShardColumnStatements(e.Table, kind, 0)
			column := regexp.MustCompile(`shard_key\s+(\w+) NOT NULL`).FindStringSubmatch(strings.Join(d.ShardColumnSchema(e.Table, kind), "\n"))
			if column == nil {
				t.Fatalf("%v: no shard_key column in the schema", kind)
			}
			row := " FROM (SELECT $1::" + column[1] + " AS shard_key, $2::bytea AS key) AS r"
			purge := "SELECT " + lockArgument(t, st.PurgeSelect) + row
			claim := "SELECT " + strings.ReplaceAll(lockArgument(t, st.Claim), "{lock_id}", "$3") + row
			for i, v := range values {
				bound, err := kind.Value(v)
				if err != nil {
					t.Fatalf("%v: %#v: %v", kind, v, err)
				}
				key := []byte{byte(i), 'k', 0, byte(i >> 8)}
				var got, want int64
				if err := db.QueryRowContext(ctx, purge, bound, key).Scan(&got); err != nil {
					t.Fatalf("%v: %#v: %s: %v", kind, v, purge, err)
				}
				if err := db.QueryRowContext(ctx, claim, bound, key, dialect.LockID(kind.LockBytes(bound, key))).Scan(&want); err != nil {
					t.Fatalf("%v: %#v: %s: %v", kind, v, claim, err)
				}
				if got != want {
					t.Errorf("%v: shard value %#v, key %x: Purge takes lock %d, the claim %d", kind, v, key, got, want)
				}
			}
		}
	})
}

// lockArgument is the argument of the first pg_try_advisory_xact_lock in
// the statement q.
func lockArgument(t *testing.T, q string) string {
	t.Helper()
	const call = "pg_try_advisory_xact_lock("
	i := strings.Index(q, call)
	if i < 0 {
		t.Fatalf("no %s) in %s", call, q)
	}
	depth := 1
	for j := i + len(call); j < len(q); j++ {
		switch q[j] {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return q[i+len(call) : j]
			}
		}
	}
	t.Fatalf("unbalanced %s in %s", call, q)
	return ""
}

// shardValues returns values of every kind: the edges, and many drawn from
// a fixed seed, so that a failure repeats.
func shardValues() map[idem.ShardKind][]any {
	r := rand.New(rand.NewPCG(1, 2))
	ints := []any{int64(0), int64(-1), int64(1), int64(math.MinInt64), int64(math.MaxInt64), int64(256)}
	texts := []any{"", " ", "tenant-a", "TENANT-a", "ténant-a", "tenant-a ", strings.Repeat("é", 32), "日本語のテナント"}
	bytes := []any{[]byte{}, []byte{0}, []byte{0, 0}, []byte{0xff, 0xfe}, []byte(strings.Repeat("\x80", 64))}
	uuids := []any{"00000000-0000-0000-0000-000000000000", "6BA7B810-9DAD-11D1-80B4-00C04FD430C8", "ffffffff-ffff-ffff-ffff-ffffffffffff"}
	for range 200 {
		ints = append(ints, int64(r.Uint64()))
		runes := make([]rune, r.IntN(20))
		for i := range runes {
			runes[i] = rune(1 + r.IntN(0x2FFF))
		}
		texts = append(texts, string(runes))
		b := make([]byte, r.IntN(64))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		bytes = append(bytes, b)
		var u [16]byte
		for i := range u {
			u[i] = byte(r.Uint32())
		}
		uuids = append(uuids, u)
	}
	return map[idem.ShardKind][]any{
		idem.ShardInt64():    ints,
		idem.ShardText(255):  texts,
		idem.ShardBytes(255): bytes,
		idem.ShardUUID():     uuids,
	}
}
