package campaign

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem"
)

// The work of the workload's requests, on each driver's transactions: its
// effects, written in the Store's transaction, and its responses.

// execIn sends a statement in a driver's transaction.
type execIn[TX any] func(ctx context.Context, tx TX, query string, args ...any) error

func sqlExec(ctx context.Context, tx *sql.Tx, query string, args ...any) error {
	_, err := tx.ExecContext(ctx, query, args...)
	return err
}

func pgxExec(ctx context.Context, tx pgx.Tx, query string, args ...any) error {
	_, err := tx.Exec(ctx, query, args...)
	return err
}

// Body is the body of every response the workload's work makes.
type Body struct {
	Key     []byte `json:"key"`
	Shard   int64  `json:"shard"`
	Inc     int64  `json:"inc"`
	Op      string `json:"op"` // the operation whose work made it
	Settled bool   `json:"settled,omitempty"`
}

// pay writes the payment's effect in tx and returns its response.
func pay[TX any](ctx context.Context, s *service, exec execIn[TX], tx TX, op string) (idem.Response, error) {
	resp, err := effect(ctx, s, exec, tx, "final", op, true)
	if err == nil {
		s.pass(PointInFunc)
	}
	return resp, err
}

// effect writes the effect of phase for the request that ctx names, in
// tx, and, when final, makes the response that is stored with it.
func effect[TX any](ctx context.Context, s *service, exec execIn[TX], tx TX, phase, op string, final bool) (idem.Response, error) {
	id, ok := idem.IdentityFrom(ctx)
	if !ok {
		return idem.Response{}, errors.New("campaign: no identity in the context")
	}
	shard, _ := id.Shard.(int64)
	var resp idem.Response
	if final {
		wroteFinal(ctx)
		body, _ := json.Marshal(Body{Key: []byte(id.Key), Shard: shard, Inc: id.Incarnation, Op: op})
		resp = idem.Response{Status: http.StatusCreated, Body: body, Header: http.Header{
			"Content-Type":   {"application/json"},
			"X-Campaign-Inc": {strconv.FormatInt(id.Incarnation, 10)},
		}}
	}
	header, _ := json.Marshal(resp.Header)
	err := exec(ctx, tx, fmt.Sprintf(`INSERT INTO %s (stored_key, shard, inc, phase, op, status, header, body, at) VALUES (%s, %s)`,
		effectsTable(s.cfg.Table), placeholders(s.cfg.Family, 8), nowMicros(s.cfg.Family)),
		[]byte(id.Key), shard, id.Incarnation, phase, op, resp.Status, string(header), append([]byte{}, resp.Body...))
	if err != nil {
		return idem.Response{}, fmt.Errorf("campaign: write the effect: %w", err)
	}
	return resp, nil
}

// checkout is the multi-step request: an order, a charge at the
// provider, the charge recorded, and the confirmation that answers, with
// the response that final, when it is set, makes of the confirmation's
// (a gRPC reply).
func checkout[TX any](s *service, exec execIn[TX], op string, final func(context.Context, idem.Response) (idem.Response, error)) []idem.Step {
	return []idem.Step{
		idem.Phase("order", func(ctx context.Context, tx TX) error {
			_, err := effect(ctx, s, exec, tx, "order", op, false)
			return err
		}),
		idem.Call("charge", func(ctx context.Context, callKey string) error {
			s.pass(PointBetween)
			id, _ := idem.IdentityFrom(ctx)
			err := charge(ctx, s.cfg.Provider, callKey, id)
			if err == nil {
				s.pass(PointInCall)
			}
			return err
		}),
		idem.Phase("charged", func(ctx context.Context, tx TX) error {
			_, err := effect(ctx, s, exec, tx, "charged", op, false)
			return err
		}),
		idem.Final("confirm", func(ctx context.Context, tx TX) (idem.Response, error) {
			s.pass(PointBetween)
			resp, err := effect(ctx, s, exec, tx, "final", op, true)
			if err != nil {
				return resp, err
			}
			if final != nil {
				if resp, err = final(ctx, resp); err != nil {
					return resp, err
				}
			}
			s.pass(PointInFunc)
			return resp, nil
		}),
	}
}
