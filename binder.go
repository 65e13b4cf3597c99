package idem

import (
	"context"
	"fmt"
	"strings"

	"github.com/idemgo/idem/driver"
)

// The binder turns a dialect's statements, written with {name} parameters,
// into SQL with the dialect's placeholders and the list of values to bind,
// once, in New.

// param names one value a statement can bind.
type param uint8

const (
	paramKey param = iota
	paramRequestHash
	paramCreatedAt
	paramExpiresAt
	paramStatus
	paramHeader
	paramBody
	paramChecksum
	paramNow
	paramLimit
	paramToken
	paramLockID
	paramKeys
	// paramShard is the value of the shard column (WithShardColumn),
	// which every statement that binds {key} binds in a table that has it.
	paramShard
	// The parameters of multi-step requests, which only the statements
	// of RunStatements bind.
	paramPhase
	paramLease
	paramClockOffset
	paramPrevToken
	paramBackoffBase
	paramBackoffMax
	// paramIncarnation is the incarnation of the record that a claim
	// creates, which only the claims and the takeover of an expired
	// record bind.
	paramIncarnation
)

// paramNames are the names of the parameters in SQL, as {name}.
var paramNames = [...]string{
	paramKey:         "key",
	paramRequestHash: "request_hash",
	paramCreatedAt:   "created_at",
	paramExpiresAt:   "expires_at",
	paramStatus:      "status",
	paramHeader:      "header",
	paramBody:        "body",
	paramChecksum:    "checksum",
	paramNow:         "now",
	paramLimit:       "limit",
	paramToken:       "token",
	paramLockID:      "lock_id",
	paramKeys:        "keys",
	paramShard:       "shard",
	paramPhase:       "phase",
	paramLease:       "lease",
	paramClockOffset: "clock_offset",
	paramPrevToken:   "prev_token",
	paramBackoffBase: "backoff_base",
	paramBackoffMax:  "backoff_max",
	paramIncarnation: "incarnation",
}

func paramByName(name string) (param, bool) {
	for p, n := range paramNames {
		if n == name {
			return param(p), true
		}
	}
	return 0, false
}

// values holds everything a statement may bind.
type values struct {
	key, requestHash       []byte
	createdAt, expiresAt   int64
	status                 int64
	header, body, checksum []byte
	now                    int64
	limit                  int64
	token, lockID          int64
	keys                   [][]byte // the batch of a purge, for {keys}
	// shard is the value of the shard column, nil in a table without
	// one (WithShard), and shards the shard values of a purge's batch,
	// one for each of keys.
	shard            any
	shards           []any
	phase            string // a multi-step request's recovery point
	lease, prevToken int64  // its lease's length, and the token it takes over
	clockOffset      int64  // added to the database's clock (internal/testhook)
	// incarnation is the incarnation of the record that the claim
	// creates (newIncarnation), and, once a call owns a record, that
	// record's: 0 where the dialect's records have none.
	incarnation int64
	// work is the context of the work of the claim's request, with its
	// Identity (Store.work), kept here so that it costs no allocation of
	// its own.
	work workContext

	// argBuf holds the arguments of the statement being sent, which
	// database/sql copies before the call returns, and keyArg the key
	// boxed once for all the statements of a call.
	argBuf [8]any
	keyArg any
}

func (v *values) get(p param) any {
	switch p {
	case paramKey:
		if v.keyArg == nil {
			v.keyArg = v.key
		}
		return v.keyArg
	case paramShard:
		return v.shard
	case paramRequestHash:
		return v.requestHash
	case paramCreatedAt:
		return v.createdAt
	case paramExpiresAt:
		return v.expiresAt
	case paramStatus:
		return v.status
	case paramHeader:
		return v.header
	case paramBody:
		return v.body
	case paramChecksum:
		return v.checksum
	case paramNow:
		return v.now
	case paramLimit:
		return v.limit
	case paramToken:
		return v.token
	case paramPhase:
		return v.phase
	case paramLease:
		return v.lease
	case paramClockOffset:
		return v.clockOffset
	case paramPrevToken:
		return v.prevToken
	case paramBackoffBase:
		return resumeBackoffBase.Microseconds()
	case paramBackoffMax:
		return resumeBackoffMax.Microseconds()
	case paramIncarnation:
		return v.incarnation
	default:
		return v.lockID
	}
}

// statement is one SQL text with its {name} parameters replaced by
// placeholders, and the values to bind, in order.
type statement struct {
	query  string
	params []param
}

func (s *statement) uses(p param) bool { return contains(s.params, p) }

func (s *statement) args(v *values) []any {
	args := v.argBuf[:0]
	k, sh := 0, 0
	for _, p := range s.params {
		switch {
		case p == paramKeys:
			args = append(args, v.keys[k])
			k++
			continue
		case p == paramShard && v.shards != nil:
			// a pair of a purge's batch, ({shard}, {key}) in {keys}
			args = append(args, v.shards[sh])
			sh++
			continue
		}
		args = append(args, v.get(p))
	}
	return args
}

// binder binds the statements of one Store: d's, on a table with a shard
// column when sharded is true.
type binder struct {
	d       Dialect
	sharded bool
}

// bind replaces the {name} parameters of sql with the dialect's
// placeholders. Only the names in allowed may appear: a dialect that binds
// something a statement does not provide fails in New, not at run time. A {keys} list becomes
// one placeholder. In a table with a shard column, every statement that
// may bind {key} may bind {shard} too.
func (bd binder) bind(what, sql string, allowed ...param) (statement, error) {
	return bd.bindList(what, sql, 1, allowed...)
}

// bindList is bind with {keys} replaced by n placeholders, separated by
// commas, each bound to one key of values.keys in turn; in a table with a
// shard column, by n pairs (shard, key), bound to values.shards and
// values.keys.
func (bd binder) bindList(what, sql string, n int, allowed ...param) (statement, error) {
	d := bd.d
	if bd.sharded && contains(allowed, paramKey) {
		allowed = append(allowed[:len(allowed):len(allowed)], paramShard)
	}
	numbered := d.Placeholder(1) != d.Placeholder(2)
	var (
		b      strings.Builder
		params []param
		seen   = map[param]int{}
	)
	for {
		i := strings.IndexByte(sql, '{')
		if i < 0 {
			b.WriteString(sql)
			break
		}
		j := strings.IndexByte(sql[i:], '}')
		name := ""
		if j > 0 {
			name = sql[i+1 : i+j]
		}
		p, known := paramByName(name)
		switch {
		case known:
		case isIdent(name):
			return statement{}, fmt.Errorf("%w: %s dialect: %s statement binds unknown parameter {%s}", ErrInvalidArgument, d.Name(), what, name)
		default: // a brace that is not a parameter
			b.WriteString(sql[:i+1])
			sql = sql[i+1:]
			continue
		}
		if !contains(allowed, p) {
			return statement{}, fmt.Errorf("%w: %s dialect: %s statement cannot bind {%s}", ErrInvalidArgument, d.Name(), what, name)
		}
		b.WriteString(sql[:i])
		if p == paramKeys {
			for k := range n {
				if k > 0 {
					b.WriteString(", ")
				}
				if bd.sharded {
					params = append(params, paramShard, p)
					b.WriteString("(" + d.Placeholder(len(params)-1) + ", " + d.Placeholder(len(params)) + ")")
					continue
				}
				params = append(params, p)
				b.WriteString(d.Placeholder(len(params)))
			}
			sql = sql[i+j+1:]
			continue
		}
		if n, ok := seen[p]; ok && numbered {
			b.WriteString(d.Placeholder(n))
		} else {
			params = append(params, p)
			seen[p] = len(params)
			b.WriteString(d.Placeholder(len(params)))
		}
		sql = sql[i+j+1:]
	}
	return statement{query: b.String(), params: params}, nil
}

func contains(ps []param, p param) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case '0' <= r && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// exec runs st with v's values through q, a transaction or a database
// outside any, and returns how many rows it affected. The statements of
// leases read the database's clock, moved by the Store's test offset.
func (s *Store) exec(ctx context.Context, q driver.Tx, st statement, v *values) (int64, error) {
	v.clockOffset = s.dbClockOffset()
	return q.Exec(ctx, st.query, st.args(v)...)
}

// query is st with v's values, for a driver's Owned.CommitAfter.
func (s *Store) query(st statement, v *values) driver.Statement {
	v.clockOffset = s.dbClockOffset()
	return driver.Statement{SQL: st.query, Args: st.args(v)}
}
