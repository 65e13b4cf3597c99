package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/idemgo/idem"
)

// A store whose table has a shard column keeps each record under the
// customer whose orders it protects, as a sharded database needs when the
// orders are sharded by customer: the customer comes with the context, and
// the same key of two customers is two requests.
func ExampleWithShardColumn() {
	dir, err := os.MkdirTemp("", "idem-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_txlock=immediate&_pragma=busy_timeout(5000)") // modernc.org/sqlite
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE orders (customer_id INTEGER NOT NULL, item TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	store, err := idem.New(idem.SQLite(), idem.WithShardColumn(idem.ShardInt64()))
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(context.Background(), db); err != nil {
		log.Fatal(err)
	}

	order := func(customer int64, key, item string) {
		ctx := idem.WithShard(context.Background(), customer)
		hash := idem.Fingerprint([]byte("POST /orders"), []byte(item))
		res, err := store.DoTx(ctx, db, nil, key, hash, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			if _, err := tx.ExecContext(ctx, `INSERT INTO orders (customer_id, item) VALUES (?, ?)`, customer, item); err != nil {
				return idem.Response{}, err
			}
			return idem.Response{Status: 201, Body: fmt.Appendf(nil, `{"customer":%d,"item":%q}`, customer, item)}, nil
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(customer, res.Outcome, string(res.Response.Body))
	}
	order(7, "key-1", "book")
	order(7, "key-1", "book") // a retry of customer 7
	order(8, "key-1", "lamp") // customer 8's own key-1

	_, err = store.Lookup(context.Background(), db, "key-1")
	fmt.Println(err != nil)
	// Prints:
	// 7 claimed {"customer":7,"item":"book"}
	// 7 replay {"customer":7,"item":"book"}
	// 8 claimed {"customer":8,"item":"lamp"}
	// true
}

// ParseShardKind reads a kind as a configuration file or a flag gives it,
// and as ShardKind's String writes it; a kind it does not know, or a
// length beyond 1 to 255 bytes, is ErrInvalidArgument.
func ExampleParseShardKind() {
	for _, s := range []string{"int64", "TEXT(64)", "bytes(16)", "uuid", "varchar(64)", "text(256)"} {
		kind, err := idem.ParseShardKind(s)
		if err != nil {
			fmt.Println(s, errors.Is(err, idem.ErrInvalidArgument))
			continue
		}
		fmt.Println(s, kind)
	}
	// Output:
	// int64 int64
	// TEXT(64) text(64)
	// bytes(16) bytes(16)
	// uuid uuid
	// varchar(64) true
	// text(256) true
}

// TenantID is a service's own type of the tenants its effects are sharded
// by.
type TenantID string

// A text shard column holds each tenant's name as it is, compared byte for
// byte: a name in another case is another tenant, and a name longer than
// the column is refused before anything is sent. WithShard takes the
// service's own string type.
func ExampleShardText() {
	dir, err := os.MkdirTemp("", "idem-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "tenants.db")+"?_txlock=immediate&_pragma=busy_timeout(5000)") // modernc.org/sqlite
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := idem.New(idem.SQLite(), idem.WithShardColumn(idem.ShardText(16)))
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(context.Background(), db); err != nil {
		log.Fatal(err)
	}

	request := func(tenant TenantID) {
		ctx := idem.WithShard(context.Background(), tenant)
		res, err := store.DoTx(ctx, db, nil, "key-1", idem.Fingerprint([]byte("POST /invoices")), func(context.Context, *sql.Tx) (idem.Response, error) {
			return idem.Response{Status: 201, Body: []byte("invoice of " + tenant)}, nil
		})
		if err != nil {
			fmt.Println(tenant, errors.Is(err, idem.ErrInvalidArgument))
			return
		}
		fmt.Println(tenant, res.Outcome, string(res.Response.Body))
	}
	request("acme")
	// Another tenant, whose key-1 is its own.
	request("ACME")
	// A retry of acme's request.
	request("acme")
	// 21 bytes, longer than the column's 16.
	request("acme-and-partners-ltd")
	// Prints:
	// acme claimed invoice of acme
	// ACME claimed invoice of ACME
	// acme replay invoice of acme
	// acme-and-partners-ltd true
}
