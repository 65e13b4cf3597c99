-- Adds the procedure through which idem.MySQL() claims a key of github.com/idemgo/idem in one
-- statement (see the MySQL dialect's documentation): it bounds its own wait for a held key
-- and puts the session's lock wait back before it returns. idem.MariaDB() does not use it.
-- TiDB has no stored procedures: on TiDB, run Store.Migrate (or idem migrate -dialect tidb)
-- instead of these files. Store.Migrate makes the same change.

DROP PROCEDURE IF EXISTS idempotency_keys_claim;
