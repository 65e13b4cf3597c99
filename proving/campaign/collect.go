package campaign

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idemgo/idem"
)

// collect reads what the database holds at the end into the history:
// the effects, the audit, the requests still unfinished, and what Lookup
// reads of each record that an operation named.
func (c *campaign) collect(ctx context.Context) error {
	rows, err := c.db.QueryContext(ctx, `SELECT seq, stored_key, shard, inc, phase, op, status, header, body, at FROM `+effectsTable(c.table)+` ORDER BY seq`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var e Effect
		if err := rows.Scan(&e.Seq, &e.Key, &e.Shard, &e.Inc, &e.Phase, &e.Op, &e.Status, &e.Header, &e.Body, &e.At); err != nil {
			rows.Close()
			return err
		}
		c.hist.add(Event{Type: EvEffect, Effect: &e})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if auditable(c.cfg.Target.Dialect) {
		if err := c.collectAudit(ctx); err != nil {
			return err
		}
	}
	unfinished, err := c.store.Unfinished(ctx, c.db, 0, 10000)
	if err != nil {
		return err
	}
	for _, u := range unfinished {
		shard, _ := u.Shard.(int64)
		c.hist.add(Event{Type: EvUnfinished, Unfinished: &Unfinished{Key: []byte(u.Key), Shard: shard, Inc: u.Incarnation, Phase: u.Phase, ResumeIn: u.ResumeIn}})
	}
	return c.collectRecords(ctx)
}

// collectRecords reads, through Store.Lookup, each record that an
// operation of the history named.
func (c *campaign) collectRecords(ctx context.Context) error {
	seen := map[record]bool{}
	for _, e := range c.hist.snapshot() {
		if e.Type != EvInvoke || e.Op.Action == ActPurge {
			continue
		}
		r := record{e.Op.StoredKey(), e.Op.RecordShard()}
		if seen[r] {
			continue
		}
		seen[r] = true
		res, err := c.store.Lookup(idem.WithShard(ctx, r.shard), c.db, r.key)
		end := RecordEnd{Key: []byte(r.key), Shard: r.shard, Inc: res.Incarnation, Outcome: "none"}
		switch {
		case errors.Is(err, idem.ErrNotFound):
		case err != nil:
			return fmt.Errorf("lookup %s: %w", r, err)
		case res.Outcome == idem.InFlight:
			end.Outcome = "inflight"
		default:
			end.Outcome = "replay"
		}
		c.hist.add(Event{Type: EvRecord, Record: &end})
	}
	return nil
}

func (c *campaign) collectAudit(ctx context.Context) error {
	rows, err := c.db.QueryContext(ctx, `SELECT seq, at, kind, stored_key, shard, old_inc, old_status, old_expires, old_lease, old_phase,
	new_inc, new_status, new_body, new_expires, new_lease, new_phase FROM `+auditTable(c.table)+` ORDER BY seq`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var a AuditRow
		var oldPhase, newPhase []byte
		var oldOK, newOK [4]sql.NullInt64
		if err := rows.Scan(&a.Seq, &a.At, &a.Kind, &a.Key, &a.Shard, &oldOK[0], &oldOK[1], &oldOK[2], &oldOK[3], &oldPhase,
			&newOK[0], &newOK[1], &a.New.Body, &newOK[2], &newOK[3], &newPhase); err != nil {
			return err
		}
		a.Old.Inc, a.Old.Status, a.Old.Expires, a.Old.Lease = nullable(oldOK[0]), nullable(oldOK[1]), nullable(oldOK[2]), nullable(oldOK[3])
		a.New.Inc, a.New.Status, a.New.Expires, a.New.Lease = nullable(newOK[0]), nullable(newOK[1]), nullable(newOK[2]), nullable(newOK[3])
		a.Old.Phase, a.New.Phase = nullableText(oldPhase), nullableText(newPhase)
		c.hist.add(Event{Type: EvAudit, Audit: &a})
	}
	return rows.Err()
}

func nullable(n sql.NullInt64) *int64 {
	if !n.Valid {
		return nil
	}
	return &n.Int64
}

func nullableText(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}
