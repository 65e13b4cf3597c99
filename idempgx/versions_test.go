package idempgx

import (
	"context"
	"errors"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/txn"
	"github.com/jackc/pgx/v5"
)

// TestVersionsThatDoNotFit stands for a build whose idem gives an engine
// of another shape than this package asks for: every call answers
// errVersions, and none panics.
func TestVersionsThatDoNotFit(t *testing.T) {
	kept := txn.Engine
	t.Cleanup(func() { txn.Engine = kept })
	txn.Engine = struct{}{}

	store, err := idem.New(idem.Postgres())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fn := func(context.Context, pgx.Tx) (idem.Response, error) { return idem.Response{}, nil }
	for name, call := range map[string]func() error{
		"Do":      func() error { _, err := Do(ctx, store, nil, "k", []byte{1}, fn); return err },
		"DoTx":    func() error { _, err := DoTx(ctx, store, nil, pgx.TxOptions{}, "k", []byte{1}, fn); return err },
		"Lookup":  func() error { _, err := Lookup(ctx, store, nil, "k"); return err },
		"Migrate": func() error { return Migrate(ctx, store, nil) },
		"Refusable": func() error {
			_, err := Refusable(fn)(ctx, nil)
			return err
		},
	} {
		if err := call(); !errors.Is(err, errVersions) {
			t.Errorf("%s = %v, want errVersions", name, err)
		}
	}
}
