package dialect

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemgo/idem/driver"
)

// Vitess returns the dialect of MySQL behind Vitess's vtgate, for the
// github.com/go-sql-driver/mysql driver, on a sharded keyspace whose
// VSchema shards idem's table by its key column, with the xxhash vindex,
// which hashes bytes. It uses the table of MySQL and MariaDB.
//
// Services take it through idem.Vitess, whose documentation says what they
// need to know of the database: its versions, locks and settings.
func Vitess() Dialect { return vitess{} }

type vitess struct{ mysqlFamily }

var (
	_ Dialect       = vitess{}
	_ ShardTargeter = vitess{}
)

func (vitess) Name() string { return "vitess" }

func (vitess) Statements(table string, _ time.Duration) Statements {
	return vitessStatements(table, keying{k: "`key`"})
}

// ShardColumnStatements is Statements for a table with shard_key of kind,
// which the VSchema shards by shard_key (docs/scaling.md).
func (vitess) ShardColumnStatements(table string, kind ShardKind, _ time.Duration) Statements {
	return vitessStatements(table, mysqlKeying(kind))
}

// vitessStatements is the statements on table, whose records kk names.
func vitessStatements(table string, kk keying) Statements {
	st := mysqlStatements(table, kk)
	st.Claim = "SELECT token = {token}, 0, " + record + " FROM " + QuoteTable(table, '`') + " WHERE " + kk.match("") + " FOR UPDATE"
	// MySQL's delete with the index hint that vttablet parses: the
	// optimizer hint INDEX keeps the delete on the primary key, away from
	// the records that claims hold, as FORCE INDEX does on MySQL.
	st.PurgeDelete = "DELETE /*+ INDEX(p PRIMARY) */ FROM " + QuoteTable(table, '`') + " AS p WHERE " + kk.in("p.") + " AND p.expires_at <= {now}"
	return st
}

// Shards lists the shards of the session's keyspace, from vtgate's SHOW
// VITESS_SHARDS, which names every keyspace's shards as keyspace/shard.
func (vitess) Shards(ctx context.Context, q driver.Tx) ([]string, error) {
	var target sql.NullString
	if err := q.QueryRow(ctx, "SELECT DATABASE()", nil, &target); err != nil {
		return nil, err
	}
	// A session's target may name a shard or a tablet type after its
	// keyspace (keyspace/shard, keyspace:shard, keyspace@primary).
	keyspace, _, _ := strings.Cut(target.String, "@")
	keyspace, _, _ = strings.Cut(keyspace, ":")
	keyspace, _, _ = strings.Cut(keyspace, "/")
	if keyspace == "" {
		return nil, errors.New("the session uses no keyspace: name it in the DSN")
	}
	var shards []string
	err := q.Query(ctx, "SHOW VITESS_SHARDS", nil, func(scan func(dest ...any) error) error {
		var shard string
		if err := scan(&shard); err != nil {
			return err
		}
		if strings.HasPrefix(shard, keyspace+"/") {
			shards = append(shards, shard)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(shards) == 0 {
		return nil, fmt.Errorf("vtgate lists no shard of keyspace %q", keyspace)
	}
	return shards, nil
}

// TargetShard addresses the session to shard, a keyspace/shard of Shards.
func (vitess) TargetShard(shard string) string {
	return "USE `" + strings.ReplaceAll(shard, "`", "``") + "`"
}

// Capabilities says that a claim waits at least a second, as MySQL accepts
// no innodb_lock_wait_timeout below 1, that the table is sharded by its
// key on a vtgate that may refuse a transaction on two shards, and that
// vtgate keeps a transaction's isolation level for the session.
func (vitess) Capabilities() Capabilities {
	return Capabilities{MinLockWait: time.Second, ShardedByKey: true, KeepsIsolation: true}
}

// Hint names the database family of an error that is not the MySQL
// family's.
func (vitess) Hint(err error) string { return wrongServer(err, "MySQL-family") }
