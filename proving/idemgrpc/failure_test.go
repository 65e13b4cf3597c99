package idemgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemgrpc"
	"github.com/idemgo/idem/proving/dbtest"
)

// hook collects what the interceptor reports.
type hook struct {
	mu   sync.Mutex
	errs []error
}

func (h *hook) option() idemgrpc.Option {
	return idemgrpc.WithErrorHook(func(_ context.Context, _ string, err error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.errs = append(h.errs, err)
	})
}

func (h *hook) reported() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.errs...)
}

// TestConflictIsRetryable has the handler report a conflict on every
// attempt: DoTx runs it five times, in transactions that roll back, and
// the client gets an Unavailable to retry, which carries no metadata of
// the attempts (a gRPC retry policy only retries a trailers-only answer).
func TestConflictIsRetryable(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		var attempts atomic.Int64
		var h hook
		s := &shop{e: e, before: func(ctx context.Context, method string) error {
			n := attempts.Add(1)
			if err := e.Effects.Insert(ctx, idemgrpc.Tx(ctx), "k", "doomed"); err != nil {
				return err
			}
			_ = grpc.SetHeader(ctx, metadata.Pairs("x-run", fmt.Sprint(n)))
			_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", fmt.Sprint(n)))
			return fmt.Errorf("the database says: %w", idem.ErrRetry)
		}}
		conn := serve(t, s, e.protect(t, protected, h.option()))
		a := place(conn, "k", "book")
		wantRefusal(t, a, codes.Unavailable, idemgrpc.ReasonConflict)
		wantPushback(t, a, 1000)
		if len(a.trailer.Get("x-trailer")) != 0 {
			t.Errorf("the refusal carries an attempt's trailer: %v", a.trailer)
		}
		if n := attempts.Load(); n != 5 {
			t.Errorf("the handler ran %d times, want DoTx's 5 attempts", n)
		}
		if n := e.EffectCount(t, "k"); n != 0 {
			t.Errorf("%d effect rows, want 0", n)
		}
		e.wantNoRecord(t, "", "k")
		if errs := h.reported(); len(errs) != 1 {
			t.Errorf("reported %v, want the conflict", errs)
		}
	})
}

func TestResponseTooLarge(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg, idem.WithMaxResponseBytes(16))
		var h hook
		s, conn := e.start(t, protected, h.option())
		wantRefusal(t, place(conn, "k", "a reply longer than sixteen bytes"), codes.Internal, idemgrpc.ReasonResponseTooLarge)
		if n := e.EffectCount(t, "k"); n != 0 {
			t.Errorf("%d effect rows, want 0: the call must be undone", n)
		}
		e.wantNoRecord(t, "", "k")
		if n := s.runs.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1", n)
		}
		if errs := h.reported(); len(errs) != 1 {
			t.Errorf("reported %v, want the size", errs)
		}
	})
}

func TestDamagedRecord(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		var h hook
		s, conn := e.start(t, protected, h.option())
		wantRan(t, place(conn, "k", "book"), 1)
		if _, err := e.DB.ExecContext(context.Background(), "UPDATE "+e.Table+" SET status = 7"); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			wantRefusal(t, place(conn, "k", "book"), codes.DataLoss, idemgrpc.ReasonRecordDamaged)
		}
		if n := s.runs.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1: a damaged record still says the call ran", n)
		}
		if n := e.EffectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
		if errs := h.reported(); len(errs) != 2 {
			t.Errorf("reported %v, want the damage twice", errs)
		}
	})
}

// TestWithoutAServer calls the interceptor as a function, with no gRPC
// stream in the context: a protected call runs and replays all the same,
// with nowhere to put the replay marker.
func TestWithoutAServer(t *testing.T) {
	e := setup(t, dbtest.SQLite(""))
	s := &shop{e: e}
	ic := e.protect(t, protected)
	info := &grpc.UnaryServerInfo{Server: s, FullMethod: placeMethod}
	handler := func(ctx context.Context, req any) (any, error) { return s.place(ctx, req.(*structpb.Struct)) }
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(idemgrpc.DefaultKeyMetadata, "k"))
	req := &structpb.Struct{Fields: map[string]*structpb.Value{fieldItem: structpb.NewStringValue("book")}}
	first, err := ic(ctx, req, info, handler)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ic(ctx, req, info, handler)
	if err != nil {
		t.Fatal(err)
	}
	if string(deterministic(t, again.(*structpb.Struct))) != string(deterministic(t, first.(*structpb.Struct))) {
		t.Errorf("replay = %v, want %v", again, first)
	}
	if n := s.runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	// Nor does a nil info panic: no method is protected then.
	if _, err := ic(ctx, req, nil, handler); err != nil {
		t.Fatal(err)
	}
}

// TestHandlerCommitsItselfAndFails has the handler commit the transaction
// it was given, then fail: the client gets the handler's error, as for any
// error of the handler's, and the error hook is told idem.ErrTxEnded,
// since the key now waits for an operator (idemhttp tells its hook the
// same, TestHandlerCommitsItselfAndFails there); every retry is in flight
// until then.
func TestHandlerCommitsItselfAndFails(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg, idem.WithLockTimeout(0))
		var h hook
		s := &shop{e: e, before: func(ctx context.Context, method string) error {
			tx := idemgrpc.Tx(ctx)
			if err := e.Effects.Insert(ctx, tx, "k", "committed by the handler"); err != nil {
				return err
			}
			if err := tx.Commit(); err != nil {
				return err
			}
			return status.Error(codes.Internal, "the handler failed")
		}}
		conn := serve(t, s, e.protect(t, protected, h.option()))
		if a := place(conn, "k", "book"); status.Code(a.err) != codes.Internal || status.Convert(a.err).Message() != "the handler failed" {
			t.Errorf("%v, want the handler's own error", a.err)
		}
		if errs := h.reported(); len(errs) != 1 || !errors.Is(errs[0], idem.ErrTxEnded) {
			t.Errorf("ErrorHook got %v, want ErrTxEnded", errs)
		}
		wantRefusal(t, place(conn, "k", "book"), codes.Unavailable, idemgrpc.ReasonInFlight)
	})
}
