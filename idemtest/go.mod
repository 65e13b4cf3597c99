module github.com/idemgo/idem/idemtest

go 1.26.0

require (
	github.com/DATA-DOG/go-sqlmock v1.5.2
	github.com/idemgo/idem v0.1.0
)
