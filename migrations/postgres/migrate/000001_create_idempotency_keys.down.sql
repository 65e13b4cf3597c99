-- The table of github.com/idemgo/idem for the postgres dialect, as its first version made it.
-- migrations_test.go applies the files of this directory in order, and checks the
-- table they make against Store.Schema.

DROP TABLE idempotency_keys;
