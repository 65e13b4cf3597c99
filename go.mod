module github.com/idemgo/idem

go 1.26.0
