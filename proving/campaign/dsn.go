package campaign

import (
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// serverAddr returns the host:port of dsn.
func serverAddr(family, dsn string) (string, error) {
	var addr string
	_, err := withAddrFunc(family, dsn, func(a string) string { addr = a; return a })
	return addr, err
}

// withAddr returns dsn with its server's address replaced by addr.
func withAddr(family, dsn, addr string) (string, error) {
	return withAddrFunc(family, dsn, func(string) string { return addr })
}

func withAddrFunc(family, dsn string, f func(string) string) (string, error) {
	switch family {
	case "postgres":
		i := strings.Index(dsn, "@")
		j := strings.Index(dsn[i+1:], "/")
		if i < 0 || j < 0 {
			return "", fmt.Errorf("campaign: a PostgreSQL DSN without user@host:port/: %q", dsn)
		}
		return dsn[:i+1] + f(dsn[i+1:i+1+j]) + dsn[i+1+j:], nil
	case "mysql":
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return "", err
		}
		cfg.Addr = f(cfg.Addr)
		return cfg.FormatDSN(), nil
	}
	return "", fmt.Errorf("campaign: no server address in a %s DSN", family)
}
