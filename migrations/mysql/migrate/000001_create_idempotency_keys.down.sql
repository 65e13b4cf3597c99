-- The table of github.com/idemgo/idem, as Store.Schema gives it for the mysql dialect.
-- migrations_test.go checks that it stays so; go test -run TestMigrationFiles -update rewrites it.

DROP TABLE idempotency_keys;
