package idem_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/lib/pq"

	"github.com/idemgo/idem"
)

// TestClassify pins what each built-in dialect makes of its database's
// errors, wrapped or not: the numbers that the documentation names as
// conflicts to retry, and as lock waits that ran out.
func TestClassify(t *testing.T) {
	my := func(n uint16) error { return &mysql.MySQLError{Number: n, Message: "test"} }
	for _, c := range []struct {
		dialect idem.Dialect
		err     error
		want    idem.ErrorKind
	}{
		{idem.Postgres(), &pq.Error{Code: "40001"}, idem.ErrorRetry},
		{idem.Postgres(), &pq.Error{Code: "40P01"}, idem.ErrorRetry},
		{idem.Postgres(), &pq.Error{Code: "55P03"}, idem.ErrorRetry},
		{idem.Postgres(), &pq.Error{Code: "23505"}, idem.ErrorOther},
		{idem.MySQL(), my(1213), idem.ErrorRetry},
		{idem.MySQL(), my(1020), idem.ErrorRetry},
		{idem.MySQL(), my(1205), idem.ErrorLockTimeout},
		{idem.MySQL(), my(3572), idem.ErrorLockTimeout},
		{idem.MySQL(), my(1062), idem.ErrorOther},
		{idem.MySQL(), my(1064), idem.ErrorOther},
		// TiDB's own.
		{idem.TiDB(), my(8002), idem.ErrorRetry},
		{idem.TiDB(), my(8005), idem.ErrorRetry},
		{idem.TiDB(), my(8022), idem.ErrorRetry},
		{idem.TiDB(), my(8028), idem.ErrorRetry},
		{idem.TiDB(), my(9007), idem.ErrorRetry},
		{idem.TiDB(), my(1205), idem.ErrorLockTimeout},
		{idem.TiDB(), &mysql.MySQLError{Number: 1105, Message: "lock wait timeout"}, idem.ErrorLockTimeout},
		{idem.TiDB(), &mysql.MySQLError{Number: 1105, Message: "other"}, idem.ErrorOther},
		{idem.MySQL(), &mysql.MySQLError{Number: 1105, Message: "lock wait timeout"}, idem.ErrorOther},
		{idem.MariaDB(), my(9007), idem.ErrorRetry},
		{idem.MariaDB(), my(1205), idem.ErrorLockTimeout},
		{idem.MySQL(), errors.New("Error 1213: not the driver's type"), idem.ErrorOther},
	} {
		for _, err := range []error{c.err, fmt.Errorf("wrapped: %w", c.err)} {
			if got := c.dialect.Classify(err); got != c.want {
				t.Errorf("%s.Classify(%v) = %v, want %v", c.dialect.Name(), err, got, c.want)
			}
		}
	}
}
