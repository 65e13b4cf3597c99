package main

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/dbtest"
)

// TestShardValue: -shard is bound as an int64 for an integer column, in
// any case and with a width, and as the text given for any other column.
func TestShardValue(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		typ, value string
		want       any
	}{
		{"BIGINT", "42", int64(42)},
		{"bigint", "-7", int64(-7)},
		{"Int", "9223372036854775807", int64(9223372036854775807)},
		{"INTEGER", "0", int64(0)},
		{"SMALLINT", "3", int64(3)},
		{"int(11)", "5", int64(5)},
		{"BIGINT UNSIGNED", "6", int64(6)},
		{"int8", "8", int64(8)},
		{"varchar(64)", "42", "42"},
		{"text", "", ""},
		{"uuid", "5f0c3c1e-8f0b-4a43-9a57-1a3c1d6c2b11", "5f0c3c1e-8f0b-4a43-9a57-1a3c1d6c2b11"},
		{"interval", "1", "1"},
		{"bigserialish", "1", "1"},
	} {
		k := keyFlags{shard: givenFlag{value: c.value, set: true}}
		got, err := k.shardValue("forget", c.typ)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("-shard-column %s -shard %q: %#v, %v; want %#v", c.typ, c.value, got, err, c.want)
		}
	}
}

// dropClaimAtEnd drops the claim's procedures that the MySQL dialect's
// Migrate makes beside tb's table, when the test ends.
func (tb *testDB) dropClaimAtEnd(t *testing.T) {
	if tb.Dialect.Name() == "mysql" {
		dbtest.DropProceduresAtEnd(t, tb.db, tb.table)
	}
}

// TestSchemaShardColumn: idem schema -shard-column prints the table of a
// Store with that shard column, not the table keyed by the key alone.
func TestSchemaShardColumn(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		flag    string
		dialect idem.Dialect
	}{
		{"postgres", idem.Postgres()}, {"mysql", idem.MySQL()}, {"mariadb", idem.MariaDB()},
		{"tidb", idem.TiDB()}, {"vitess", idem.Vitess()}, {"sqlite", idem.SQLite()},
	} {
		store, err := idem.New(c.dialect, idem.WithTable("idem_keys"), idem.WithShardColumn(dbtest.ShardType))
		if err != nil {
			t.Fatal(err)
		}
		r := runCmd(t, "schema", "-dialect", c.flag, "-table", "idem_keys", "-shard-column", dbtest.ShardType)
		r.wantCode(t, exitOK)
		if want := schemaText(store.Schema()); r.stdout != want {
			t.Errorf("idem schema -dialect %s -shard-column %s:\n%s\nwant:\n%s", c.flag, dbtest.ShardType, r.stdout, want)
		}
		if !regexp.MustCompile(`shard_key +` + dbtest.ShardType + ` NOT NULL`).MatchString(r.stdout) {
			t.Errorf("idem schema -dialect %s -shard-column %s has no shard_key %s:\n%s", c.flag, dbtest.ShardType, dbtest.ShardType, r.stdout)
		}
	}
}

// TestShardColumnCommands runs every command that makes a Store on a table
// with a shard column, which idem migrate -shard-column creates: one key is
// stored for two customers, and each command that acts on a key acts on the
// record of the customer -shard names, and on no other; unfinished shows
// each request's customer; purge deletes the expired records of every
// customer, and keeps the live ones. Without -shard-column, every command
// that reads the table refuses it, and changes nothing. On Vitess, with
// transaction_mode SINGLE, and on Citus, the table is sharded by shard_key
// once migrate has made it, as an operator shards it (docs/scaling.md).
func TestShardColumnCommands(t *testing.T) {
	forEach(t, shardColumnCommands)
	dbtest.ForEach(t, dbtest.VitessTargets(), func(t *testing.T, tg dbtest.Target) {
		t.Parallel()
		shardColumnCommands(t, newTestDB(t, commandTarget(t, tg)))
	})
	dbtest.SkipMissingVitess(t)
	dbtest.ForEach(t, dbtest.CitusTargets(), func(t *testing.T, tg dbtest.Target) {
		t.Parallel()
		shardColumnCommands(t, newTestDB(t, commandTarget(t, tg)))
	})
	dbtest.SkipMissingCitus(t)
}

func shardColumnCommands(t *testing.T, tb *testDB) {
	{
		tb.dropClaimAtEnd(t)
		bg := context.Background()
		sharded := func(more ...string) []string {
			return tb.args(append([]string{"-shard-column", dbtest.ShardType}, more...)...)
		}
		e := testEnv(t0.Add(3 * time.Minute))
		cmd := func(t *testing.T, name string, more ...string) result {
			t.Helper()
			return runWith(t, e, append([]string{name}, sharded(more...)...)...)
		}

		r := runCmd(t, append([]string{"migrate"}, sharded()...)...)
		r.wantCode(t, exitOK)
		equalLines(t, r.stdout, "created table "+tb.table+" and its index ("+tb.Dialect.Name()+")")
		if tb.Distributed {
			if _, err := tb.db.ExecContext(bg, `SELECT create_distributed_table($1, 'shard_key')`, tb.table); err != nil {
				t.Fatalf("distribute %s: %v", tb.table, err)
			}
		}
		if tb.Dialect.Name() == "vitess" {
			dbtest.AddVindex(t, tb.db, tb.table, "shard_key")
			// The customers of each subtest's records live on both
			// shards, -80 and 80-.
			for _, pair := range [][2]int64{{1, 10}, {7, 8}, {11, 15}} {
				a, errA := dbtest.ShardOf(bg, tb.db, pair[0])
				b, errB := dbtest.ShardOf(bg, tb.db, pair[1])
				if errA != nil || errB != nil || a == b {
					t.Fatalf("customers %d and %d: shards %q and %q (%v, %v), want two shards", pair[0], pair[1], a, b, errA, errB)
				}
			}
		}
		store, err := idem.New(tb.Dialect, idem.WithTable(tb.table), idem.WithShardColumn(dbtest.ShardType),
			idem.WithClock(func() time.Time { return t0 }), idem.WithLease(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		customer := func(id int64) context.Context { return idem.WithShard(bg, id) }
		put := func(t *testing.T, id int64, key string, status int) {
			t.Helper()
			res, err := store.DoTx(customer(id), tb.db, nil, key, idem.Fingerprint([]byte(key)), func(context.Context, *sql.Tx) (idem.Response, error) {
				return idem.Response{Status: status}, nil
			})
			if err != nil || res.Outcome != idem.Claimed {
				t.Fatalf("Do of %s for customer %d: %v, %v", key, id, res.Outcome, err)
			}
		}
		lookup := func(t *testing.T, id int64, key string) (idem.Result, error) {
			t.Helper()
			return store.Lookup(customer(id), tb.db, key)
		}
		stuck := func(t *testing.T, id int64, key string) {
			t.Helper()
			_, err := store.DoTx(customer(id), tb.db, nil, key, idem.Fingerprint([]byte(key)), func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
				return idem.Response{Status: 201}, tx.Commit()
			})
			if !errors.Is(err, idem.ErrTxEnded) {
				t.Fatalf("DoTx with a Func that commits = %v, want ErrTxEnded", err)
			}
		}

		t.Run("Refused", func(t *testing.T) {
			put(t, 1, "refused", 201)
			put(t, 10, "refused", 202)
			for _, args := range [][]string{
				{"inspect", "-key", "refused"},
				{"forget", "-key", "refused"},
				{"settle", "-key", "refused", "-status", "500"},
				{"release", "-key", "refused", "-no-effect"},
				{"unfinished"},
				{"purge"},
				{"stats"},
			} {
				r := runWith(t, e, append(args[:1:1], tb.args(args[1:]...)...)...)
				wantError(t, r, exitUsage, "idem: table "+tb.table+" has a shard column, shard_key: give its SQL type with -shard-column, as the service's idem.WithShardColumn does")
			}
			for id, status := range map[int64]int{1: 201, 10: 202} {
				if res, err := lookup(t, id, "refused"); err != nil || res.Response.Status != status {
					t.Errorf("customer %d's record after the refused commands: %v, %v; want status %d", id, res.Response.Status, err, status)
				}
			}
		})

		t.Run("Inspect", func(t *testing.T) {
			put(t, 1, "order-1", 201)
			put(t, 10, "order-1", 202)
			for _, c := range []struct {
				shard, status string
			}{{"1", "201 Created"}, {"10", "202 Accepted"}} {
				r := cmd(t, "inspect", "-key", "order-1", "-shard", c.shard)
				r.wantCode(t, exitOK)
				if want := `key      "order-1"` + "\nshard    " + c.shard + "\nstate    finished"; !strings.HasPrefix(r.stdout, want) || !strings.Contains(r.stdout, "\nstatus   "+c.status+"\n") {
					t.Errorf("inspect -shard %s:\n%s\nwant it to begin %q and show status %s", c.shard, r.stdout, want, c.status)
				}
			}
			r := cmd(t, "inspect", "-key", "order-1", "-shard", "3")
			r.wantCode(t, exitNotFound)
			// An expired record is read by the Store's own statement, with
			// the shard value bound where the dialect put it.
			old, err := idem.New(tb.Dialect, idem.WithTable(tb.table), idem.WithShardColumn(dbtest.ShardType),
				idem.WithClock(func() time.Time { return t0.Add(-48 * time.Hour) }))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := old.DoTx(customer(4), tb.db, nil, "order-0", idem.Fingerprint([]byte("order-0")), func(context.Context, *sql.Tx) (idem.Response, error) {
				return idem.Response{Status: 201}, nil
			}); err != nil {
				t.Fatal(err)
			}
			r = cmd(t, "inspect", "-key", "order-0", "-shard", "4")
			r.wantCode(t, exitNotFound)
			if !strings.Contains(r.stdout, "an expired record waits for purge: created 2025-03-02 05:06:07.123456 UTC") {
				t.Errorf("inspect of customer 4's expired record:\n%s", r.stdout)
			}
			r = cmd(t, "inspect", "-key", "order-0", "-shard", "5")
			r.wantCode(t, exitNotFound)
			if strings.Contains(r.stdout, "expired record") {
				t.Errorf("inspect -shard 5 shows customer 4's expired record:\n%s", r.stdout)
			}
		})

		t.Run("Forget", func(t *testing.T) {
			put(t, 1, "order-2", 201)
			put(t, 10, "order-2", 202)
			r := cmd(t, "forget", "-key", "order-2", "-shard", "1")
			r.wantCode(t, exitOK)
			equalLines(t, r.stdout,
				`key      "order-2"`,
				`shard    1`,
				`state    forgotten: the record is deleted; the next request with this key runs as a new one`)
			if _, err := lookup(t, 1, "order-2"); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("customer 1's record after forget -shard 1: %v, want ErrNotFound", err)
			}
			if res, err := lookup(t, 10, "order-2"); err != nil || res.Response.Status != 202 {
				t.Errorf("customer 10's record after forget -shard 1: %v, %v; want it kept", res.Response.Status, err)
			}
			wantError(t, cmd(t, "forget", "-key", "order-2", "-shard", "1"), exitNotFound,
				`idem: no live record for key "order-2" of shard 1: it was never committed, it expired, or it was purged; nothing to forget (check -key, and -scope or -single-client for a key that came through idemhttp or idemgrpc)`)
		})

		t.Run("SettleRelease", func(t *testing.T) {
			stuck(t, 1, "order-3")
			stuck(t, 10, "order-3")
			r := cmd(t, "settle", "-key", "order-3", "-shard", "1", "-status", "201", "-body", "placed")
			r.wantCode(t, exitOK)
			if !strings.HasPrefix(r.stdout, `key      "order-3"`+"\nshard    1\nstate    settled") {
				t.Errorf("settle -shard 1:\n%s", r.stdout)
			}
			if res, err := lookup(t, 1, "order-3"); err != nil || res.Outcome != idem.Replay || string(res.Response.Body) != "placed" {
				t.Errorf("customer 1's record after settle: %v %q, %v; want the settled response", res.Outcome, res.Response.Body, err)
			}
			if res, err := lookup(t, 10, "order-3"); err != nil || res.Outcome != idem.InFlight {
				t.Errorf("customer 10's record after settle -shard 1: %v, %v; want it in flight", res.Outcome, err)
			}
			wantError(t, cmd(t, "release", "-key", "order-3", "-shard", "1", "-no-effect"), exitFinished,
				`idem: key "order-3" of shard 1 has finished: retries get its stored response (idem inspect shows it), and there is nothing to release`)
			cmd(t, "release", "-key", "order-3", "-shard", "10", "-no-effect").wantCode(t, exitOK)
			if _, err := lookup(t, 10, "order-3"); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("customer 10's record after release -shard 10: %v, want ErrNotFound", err)
			}
			if res, err := lookup(t, 1, "order-3"); err != nil || res.Outcome != idem.Replay {
				t.Errorf("customer 1's record after release -shard 10: %v, %v; want it kept", res.Outcome, err)
			}
		})

		t.Run("Unfinished", func(t *testing.T) {
			down := errors.New("provider unreachable")
			for _, id := range []int64{7, 8} {
				if err := runOrder(customer(id), store, tb.db, "order-4", func(context.Context, string) error { return down }); !errors.Is(err, down) {
					t.Fatalf("Run for customer %d: %v, want the provider's error", id, err)
				}
			}
			r := runWith(t, testEnv(t0.Add(10*time.Minute)), append([]string{"unfinished"}, sharded()...)...)
			r.wantCode(t, exitOK)
			want := regexp.MustCompile(`^SHARD +KEY +STEP +BEGAN +LEASE +RESUMER +INCARNATION\n` +
				`(7|8) +"order-4" +order +10m0s ago +ran out \d+s ago +takes it next +-?[1-9]\d*\n` +
				`(7|8) +"order-4" +order +10m0s ago +ran out \d+s ago +takes it next +-?[1-9]\d*\n$`)
			m := want.FindStringSubmatch(r.stdout)
			if m == nil || m[1] == m[2] {
				t.Fatalf("unfinished -shard-column:\n%s\nwant customers 7 and 8, matching %v", r.stdout, want)
			}
			// What unfinished shows is what -shard takes.
			cmd(t, "release", "-key", "order-4", "-shard", m[1], "-no-effect", "-phases-undone").wantCode(t, exitOK)
			r = runWith(t, testEnv(t0.Add(10*time.Minute)), append([]string{"unfinished"}, sharded()...)...)
			if !strings.Contains(r.stdout, "\n"+m[2]+" ") || strings.Contains(r.stdout, "\n"+m[1]+" ") {
				t.Errorf("unfinished after release -shard %s:\n%s", m[1], r.stdout)
			}
		})

		t.Run("PurgeStats", func(t *testing.T) {
			old, err := idem.New(tb.Dialect, idem.WithTable(tb.table), idem.WithShardColumn(dbtest.ShardType),
				idem.WithClock(func() time.Time { return t0.Add(-48 * time.Hour) }))
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []int64{11, 15} {
				if _, err := old.DoTx(customer(id), tb.db, nil, "order-5", idem.Fingerprint([]byte("order-5")), func(context.Context, *sql.Tx) (idem.Response, error) {
					return idem.Response{Status: 201}, nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			put(t, 13, "order-5", 201)
			r := runWith(t, testEnv(t0), append([]string{"stats"}, sharded()...)...)
			r.wantCode(t, exitOK)
			if !strings.Contains(r.stdout, "\nexpired keys  3, waiting for idem purge\n") {
				t.Errorf("stats -shard-column:\n%s\nwant the three expired records (order-0 and order-5 twice)", r.stdout)
			}
			r = runWith(t, testEnv(t0), append([]string{"purge"}, sharded()...)...)
			r.wantCode(t, exitOK)
			if !strings.HasPrefix(r.stdout, "purged 3 expired keys from "+tb.table) {
				t.Errorf("purge -shard-column: %q, want 3 purged", r.stdout)
			}
			if _, err := lookup(t, 13, "order-5"); err != nil {
				t.Errorf("customer 13's live record after purge: %v", err)
			}
			r = cmd(t, "inspect", "-key", "order-5", "-shard", "11")
			if r.code != exitNotFound || strings.Contains(r.stdout, "expired record") {
				t.Errorf("inspect of a purged record: exit %d\n%s", r.code, r.stdout)
			}
		})
	}
}

// TestShardColumnText: on a shard column of a text type, -shard is bound as
// the text given, spaces and all, and the commands show the value quoted,
// as they show keys; a value that looks like a number is text too.
func TestShardColumnText(t *testing.T) {
	forEach(t, func(t *testing.T, tb *testDB) {
		tb.dropClaimAtEnd(t)
		const typ = "varchar(64)"
		bg := context.Background()
		e := testEnv(t0.Add(10 * time.Minute))
		cmd := func(t *testing.T, name string, more ...string) result {
			t.Helper()
			return runWith(t, e, append([]string{name}, tb.args(append([]string{"-shard-column", typ}, more...)...)...)...)
		}
		cmd(t, "migrate").wantCode(t, exitOK)
		store, err := idem.New(tb.Dialect, idem.WithTable(tb.table), idem.WithShardColumn(typ),
			idem.WithClock(func() time.Time { return t0 }), idem.WithLease(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		down := errors.New("provider unreachable")
		for _, account := range []string{"acme corp", "007"} {
			if err := runOrder(idem.WithShard(bg, account), store, tb.db, "order-1", func(context.Context, string) error { return down }); !errors.Is(err, down) {
				t.Fatalf("Run for account %q: %v, want the provider's error", account, err)
			}
		}
		r := cmd(t, "unfinished")
		r.wantCode(t, exitOK)
		want := regexp.MustCompile(`^SHARD +KEY +STEP +BEGAN +LEASE +RESUMER +INCARNATION\n` +
			`("acme corp"|"007") +"order-1" +order +10m0s ago +ran out \d+s ago +takes it next +-?[1-9]\d*\n` +
			`("acme corp"|"007") +"order-1" +order +10m0s ago +ran out \d+s ago +takes it next +-?[1-9]\d*\n$`)
		if m := want.FindStringSubmatch(r.stdout); m == nil || m[1] == m[2] {
			t.Fatalf("unfinished -shard-column %s:\n%s\nwant accounts \"acme corp\" and \"007\", matching %v", typ, r.stdout, want)
		}
		r = cmd(t, "inspect", "-key", "order-1", "-shard", "acme corp")
		r.wantCode(t, exitOK)
		if !strings.HasPrefix(r.stdout, `key      "order-1"`+"\n"+`shard    "acme corp"`+"\nstate    unfinished") {
			t.Errorf("inspect -shard 'acme corp':\n%s", r.stdout)
		}
		// "7" is not "007" in a text column.
		cmd(t, "release", "-key", "order-1", "-shard", "7", "-no-effect", "-phases-undone").wantCode(t, exitNotFound)
		cmd(t, "release", "-key", "order-1", "-shard", "007", "-no-effect", "-phases-undone").wantCode(t, exitOK)
		if _, err := store.Lookup(idem.WithShard(bg, "007"), tb.db, "order-1"); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("account 007's record after release: %v, want ErrNotFound", err)
		}
		if res, err := store.Lookup(idem.WithShard(bg, "acme corp"), tb.db, "order-1"); err != nil || res.Outcome != idem.InFlight {
			t.Errorf("account acme corp's record after release -shard 007: %v, %v; want it kept", res.Outcome, err)
		}
	})
}
