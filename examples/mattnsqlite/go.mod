module github.com/idemgo/idem/examples/mattnsqlite

go 1.26.0

require (
	github.com/DATA-DOG/go-sqlmock v1.5.2
	github.com/idemgo/idem v0.1.0
	github.com/idemgo/idem/idemtest v0.1.0
	github.com/mattn/go-sqlite3 v1.14.53
)
