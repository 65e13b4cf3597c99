package main

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestShardValue: -shard is read as -shard-column's kind says, and bound as
// the kind's Go value, which shardText writes back as -shard takes it.
func TestShardValue(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kind, value string
		want        any
		text        string
	}{
		{"int64", "42", int64(42), "42"},
		{"INT64", "-7", int64(-7), "-7"},
		{"int64", "9223372036854775807", int64(9223372036854775807), "9223372036854775807"},
		{"int64", "007", int64(7), "7"},
		{"text(64)", "42", "42", `"42"`},
		{"text(64)", "", "", `""`},
		{"text(9)", "acme corp", "acme corp", `"acme corp"`},
		{"text(7)", "ténant", "ténant", `"ténant"`},
		{"bytes(3)", "00ff10", []byte{0, 0xff, 0x10}, "00ff10"},
		{"bytes(3)", "00FF10", []byte{0, 0xff, 0x10}, "00ff10"},
		{"bytes(1)", "", []byte{}, `""`},
		{"uuid", "5f0c3c1e-8f0b-4a43-9a57-1a3c1d6c2b11", "5f0c3c1e-8f0b-4a43-9a57-1a3c1d6c2b11", "5f0c3c1e-8f0b-4a43-9a57-1a3c1d6c2b11"},
		{"uuid", "5F0C3C1E-8F0B-4A43-9A57-1A3C1D6C2B11", "5f0c3c1e-8f0b-4a43-9a57-1a3c1d6c2b11", "5f0c3c1e-8f0b-4a43-9a57-1a3c1d6c2b11"},
	} {
		k := keyFlags{shard: givenFlag{value: c.value, set: true}}
		got, err := k.shardValue("forget", c.kind)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("-shard-column %s -shard %q: %#v, %v; want %#v", c.kind, c.value, got, err, c.want)
			continue
		}
		kind, err := idem.ParseShardKind(c.kind)
		if err != nil {
			t.Fatal(err)
		}
		if text := shardText(got, kind); text != c.text {
			t.Errorf("shardText(%#v, %v) = %s, want %s", got, kind, text, c.text)
		}
	}
	// A value that the kind refuses never reaches the database.
	for _, c := range [][2]string{
		{"int64", "4.5"}, {"int64", "0x10"}, {"int64", "-9223372036854775809"},
		{"text(3)", "abcd"}, {"text(3)", "\xc3"}, {"text(3)", "a\x00"},
		{"bytes(2)", "0"}, {"bytes(2)", "zz"}, {"bytes(2)", "000000"}, {"bytes(2)", "0x00"},
		{"uuid", "5f0c3c1e8f0b4a439a571a3c1d6c2b11"}, {"uuid", "{5f0c3c1e-8f0b-4a43-9a57-1a3c1d6c2b11}"}, {"uuid", ""},
	} {
		k := keyFlags{shard: givenFlag{value: c[1], set: true}}
		got, err := k.shardValue("forget", c[0])
		var ce *exitCodeError
		if !errors.As(err, &ce) || ce.code != exitUsage {
			t.Errorf("-shard-column %s -shard %q: %#v, %v; want a usage error", c[0], c[1], got, err)
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
		for _, kind := range []idem.ShardKind{dbtest.ShardKind, idem.ShardText(64), idem.ShardBytes(16), idem.ShardUUID()} {
			store, err := idem.New(c.dialect, idem.WithTable("idem_keys"), idem.WithShardColumn(kind))
			if err != nil {
				t.Fatal(err)
			}
			r := runCmd(t, "schema", "-dialect", c.flag, "-table", "idem_keys", "-shard-column", kind.String())
			r.wantCode(t, exitOK)
			if want := schemaText(store.Schema()); r.stdout != want {
				t.Errorf("idem schema -dialect %s -shard-column %v:\n%s\nwant:\n%s", c.flag, kind, r.stdout, want)
			}
			_, typ := c.dialect.(dialect.ShardColumn).ShardColumnCheck("idem_keys", kind)
			if !regexp.MustCompile(`(?i)shard_key +` + regexp.QuoteMeta(typ) + ` NOT NULL`).MatchString(r.stdout) {
				t.Errorf("idem schema -dialect %s -shard-column %v has no shard_key %s:\n%s", c.flag, kind, typ, r.stdout)
			}
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
			return tb.args(append([]string{"-shard-column", dbtest.ShardKind.String()}, more...)...)
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
		store, err := idem.New(tb.Dialect, idem.WithTable(tb.table), idem.WithShardColumn(dbtest.ShardKind),
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
				wantError(t, r, exitUsage, "idem: table "+tb.table+" has a shard column, shard_key: give its kind with -shard-column, as the service's idem.WithShardColumn does")
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
			old, err := idem.New(tb.Dialect, idem.WithTable(tb.table), idem.WithShardColumn(dbtest.ShardKind),
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
			old, err := idem.New(tb.Dialect, idem.WithTable(tb.table), idem.WithShardColumn(dbtest.ShardKind),
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

// TestShardColumnKinds runs the built command, as an operator does, on a
// table with a shard column of each kind but int64, which
// TestShardColumnCommands covers: migrate makes the table of the kind's
// type, which a Store of the kind then uses; one key is stored for two
// shard values, and the commands show each as -shard takes it, act on the
// record that -shard names, and keep the other's. A -shard that the column
// would not hold byte for byte names no record: "7" is not "007" in a text
// column, nor 0000ff 00ff in a bytes one; a UUID is one in either case.
// The table refuses a command whose -shard-column is another kind, or
// missing, before any statement on its records.
func TestShardColumnKinds(t *testing.T) {
	dbtest.ForEach(t, dbtest.Targets(), func(t *testing.T, tg dbtest.Target) {
		t.Parallel()
		for _, c := range []kindCase{
			{idem.ShardText(64),
				kindShard{"acme corp", "acme corp", `"acme corp"`},
				kindShard{"007", "007", `"007"`}, "7"},
			{idem.ShardUUID(),
				kindShard{[16]byte{0x5f, 0x0c, 0x3c, 0x1e, 0x8f, 0x0b, 0x4a, 0x43, 0x9a, 0x57, 0x1a, 0x3c, 0x1d, 0x6c, 0x2b, 0x11},
					"5F0C3C1E-8F0B-4A43-9A57-1A3C1D6C2B11", "5f0c3c1e-8f0b-4a43-9a57-1a3c1d6c2b11"},
				kindShard{"0d8a6a50-3c5b-4b8e-8f5e-6f1c2d3e4f50", "0d8a6a50-3c5b-4b8e-8f5e-6f1c2d3e4f50", "0d8a6a50-3c5b-4b8e-8f5e-6f1c2d3e4f50"},
				"0d8a6a50-3c5b-4b8e-8f5e-6f1c2d3e4f51"},
			{idem.ShardBytes(16),
				kindShard{[]byte{0x00, 0xff}, "00FF", "00ff"},
				kindShard{[]byte("acme"), "61636d65", "61636d65"}, "0000ff"},
		} {
			t.Run(c.kind.String(), func(t *testing.T) {
				c.run(t, newTestDB(t, commandTarget(t, tg)))
			})
		}
	})
}

// kindCase is a kind of TestShardColumnKinds, with the shard values of two
// records of one key, and a -shard that names neither.
type kindCase struct {
	kind  idem.ShardKind
	a, b  kindShard
	other string
}

// kindShard is a shard value as the service gives it to idem.WithShard,
// as an operator gives it to -shard, and as the command shows it.
type kindShard struct {
	value       any
	flag, shown string
}

func (c kindCase) run(t *testing.T, tb *testDB) {
	tb.dropClaimAtEnd(t)
	bg := context.Background()
	cmd := func(t *testing.T, name string, more ...string) result {
		t.Helper()
		return runBuilt(t, append([]string{name}, tb.args(append([]string{"-shard-column", c.kind.String()}, more...)...)...)...)
	}
	r := cmd(t, "migrate")
	r.wantCode(t, exitOK)
	equalLines(t, r.stdout, "created table "+tb.table+" and its index ("+tb.Dialect.Name()+")")
	store, err := idem.New(tb.Dialect, idem.WithTable(tb.table), idem.WithShardColumn(c.kind))
	if err != nil {
		t.Fatal(err)
	}
	// The table the command made is the Store's.
	if err := store.Migrate(bg, tb.db); err != nil {
		t.Fatalf("Migrate of the table that idem migrate -shard-column %v made: %v", c.kind, err)
	}
	lookup := func(s kindShard, key string) (idem.Result, error) {
		return store.Lookup(idem.WithShard(bg, s.value), tb.db, key)
	}
	for i, s := range []kindShard{c.a, c.b} {
		res, err := store.DoTx(idem.WithShard(bg, s.value), tb.db, nil, "order-1", idem.Fingerprint([]byte("order-1")), func(context.Context, *sql.Tx) (idem.Response, error) {
			return idem.Response{Status: 201 + i}, nil
		})
		if err != nil || res.Outcome != idem.Claimed {
			t.Fatalf("DoTx of order-1 for %s: %v, %v", s.shown, res.Outcome, err)
		}
	}

	for _, x := range []struct {
		s      kindShard
		status string
	}{{c.a, "201 Created"}, {c.b, "202 Accepted"}} {
		r := cmd(t, "inspect", "-key", "order-1", "-shard", x.s.flag)
		r.wantCode(t, exitOK)
		if want := `key      "order-1"` + "\nshard    " + x.s.shown + "\nstate    finished"; !strings.HasPrefix(r.stdout, want) || !strings.Contains(r.stdout, "\nstatus   "+x.status+"\n") {
			t.Errorf("inspect -shard %s:\n%s\nwant it to begin %q and show status %s", x.s.flag, r.stdout, want, x.status)
		}
	}
	cmd(t, "inspect", "-key", "order-1", "-shard", c.other).wantCode(t, exitNotFound)
	wantError(t, cmd(t, "forget", "-key", "order-1", "-shard", c.other), exitNotFound,
		`idem: no live record for key "order-1" of shard `+shardText(mustShard(t, c.kind, c.other), c.kind)+`: it was never committed, it expired, or it was purged; nothing to forget (check -key, and -scope or -single-client for a key that came through idemhttp or idemgrpc)`)
	r = cmd(t, "forget", "-key", "order-1", "-shard", c.a.flag)
	r.wantCode(t, exitOK)
	equalLines(t, r.stdout,
		`key      "order-1"`,
		`shard    `+c.a.shown,
		`state    forgotten: the record is deleted; the next request with this key runs as a new one`)
	if _, err := lookup(c.a, "order-1"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("%s's record after forget: %v, want ErrNotFound", c.a.shown, err)
	}
	if res, err := lookup(c.b, "order-1"); err != nil || res.Response.Status != 202 {
		t.Errorf("%s's record after forget -shard %s: %v, %v; want it kept", c.b.shown, c.a.flag, res.Response.Status, err)
	}

	// unfinished shows each request's shard value as -shard takes it.
	down := errors.New("provider unreachable")
	for _, s := range []kindShard{c.a, c.b} {
		if err := runOrder(idem.WithShard(bg, s.value), store, tb.db, "order-2", func(context.Context, string) error { return down }); !errors.Is(err, down) {
			t.Fatalf("Run of order-2 for %s: %v, want the provider's error", s.shown, err)
		}
	}
	r = cmd(t, "unfinished")
	r.wantCode(t, exitOK)
	var shown []string
	for _, l := range lines(r.stdout)[1:] {
		shown = append(shown, regexp.MustCompile(`  +`).Split(l, -1)[0])
	}
	if slices.Sort(shown); !slices.Equal(shown, slices.Sorted(slices.Values([]string{c.a.shown, c.b.shown}))) {
		t.Fatalf("unfinished -shard-column %v:\n%s\nwant the requests of %s and %s", c.kind, r.stdout, c.a.shown, c.b.shown)
	}
	cmd(t, "release", "-key", "order-2", "-shard", c.b.flag, "-no-effect", "-phases-undone").wantCode(t, exitOK)
	if _, err := lookup(c.b, "order-2"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("%s's request after release: %v, want ErrNotFound", c.b.shown, err)
	}
	if res, err := lookup(c.a, "order-2"); err != nil || res.Outcome != idem.InFlight {
		t.Errorf("%s's request after release -shard %s: %v, %v; want it kept", c.a.shown, c.b.flag, res.Outcome, err)
	}

	// Another kind, or none, is refused, and changes nothing.
	wrong := func(more ...string) []string {
		return tb.args(append([]string{"-shard-column", "int64"}, more...)...)
	}
	_, typ := tb.Dialect.(dialect.ShardColumn).ShardColumnCheck(tb.table, idem.ShardInt64())
	kindMsg := "idem: the shard column of table " + tb.table + " is not of type " + typ + ", which holds the values of -shard-column int64"
	for _, args := range [][]string{
		append([]string{"migrate"}, wrong()...),
		append([]string{"inspect"}, wrong("-key", "order-1", "-shard", "1")...),
		append([]string{"forget"}, wrong("-key", "order-1", "-shard", "1")...),
		append([]string{"purge"}, wrong()...),
	} {
		r := runBuilt(t, args...)
		r.wantCode(t, exitUsage)
		if !strings.HasPrefix(r.stderr, kindMsg) || !strings.Contains(r.stderr, `"Moving a table to a shard column"`) {
			t.Errorf("idem %s: %q, want %q and the migration's name", args[0], r.stderr, kindMsg)
		}
	}
	for _, name := range []string{"migrate", "stats"} {
		wantError(t, runBuilt(t, append([]string{name}, tb.args()...)...), exitUsage,
			"idem: table "+tb.table+" has a shard column, shard_key: give its kind with -shard-column, as the service's idem.WithShardColumn does")
	}
	if res, err := lookup(c.b, "order-1"); err != nil || res.Response.Status != 202 {
		t.Errorf("%s's record after the refused commands: %v, %v; want it kept", c.b.shown, res.Response.Status, err)
	}
}

// mustShard is the value that -shard-column kind binds for -shard flag.
func mustShard(t *testing.T, kind idem.ShardKind, flag string) any {
	t.Helper()
	k := keyFlags{shard: givenFlag{value: flag, set: true}}
	v, err := k.shardValue("test", kind.String())
	if err != nil {
		t.Fatal(err)
	}
	return v
}
