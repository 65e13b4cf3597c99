package idemgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemgrpc"
	table "github.com/idemgo/idem/internal/answer"
	"github.com/idemgo/idem/internal/runnerfuncs"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestAnswersAsTheTable holds the interceptor to the table of answers that
// idemhttp answers by too (internal/answer), entry by entry, so that it
// fails when the interceptor answers an outcome or an error otherwise, or
// when the table has an answer that no call here gets. Through a Runner
// that returns each outcome and each error of the table, wrapped as the
// Store wraps its sentinels, a method of WithMethods answers as
// table.Outcome and table.DoTx say, and one of WithStepMethods, through
// Run, as table.Outcome and table.Run say: the code, the ErrorInfo's
// reason, and the pushback, in the trailer and a RetryInfo, exactly where
// the answer asks for a retry. The refusals before the Runner (no key, a
// malformed key, an unknown client) are the table's too.
func TestAnswersAsTheTable(t *testing.T) {
	e := setup(t, dbtest.SQLite(""))
	reply := &structpb.Struct{Fields: map[string]*structpb.Value{"order": structpb.NewStringValue("stored")}}
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(reply)
	if err != nil {
		t.Fatal(err)
	}
	stored := idem.Response{Status: int(codes.OK), Body: body}
	var (
		res  idem.Result // what the runner answers
		rerr error
	)
	run := runnerfuncs.Runner{
		DoTxFunc: func(ctx context.Context, _ string, _ []byte, serve func(context.Context) (idem.Response, error)) (idem.Result, error) {
			if rerr == nil && res.Outcome == idem.Claimed {
				resp, err := serve(ctx)
				return idem.Result{Outcome: idem.Claimed, Response: resp}, err
			}
			return res, rerr
		},
		RunFunc: func(context.Context, string, []byte, []idem.Step) (idem.Result, error) { return res, rerr },
	}
	scope := idemgrpc.WithScope(func(ctx context.Context) (string, error) {
		if vs := metadata.ValueFromIncomingContext(ctx, "x-client"); len(vs) == 1 {
			return vs[0], nil
		}
		return "", errors.New("no client")
	})
	ic, err := idemgrpc.UnaryServerInterceptorWithRunner(e.Store, run, protected, idemgrpc.WithStepMethods(checkoutMethod),
		scope, idemgrpc.WithKeyRequired())
	if err != nil {
		t.Fatal(err)
	}
	conn := serve(t, &shop{e: e, steps: func(string) []idem.Step { return nil }}, ic)
	methods := map[string]string{"DoTx": placeMethod, "Run": checkoutMethod}

	answered := map[table.Answer]bool{}
	// check calls the method of path, with key and client (none when
	// empty), and holds its answer to want: a reply for the zero Answer.
	check := func(t *testing.T, path, key, client string, want table.Answer) {
		t.Helper()
		var md []string
		if key != "" {
			md = append(md, idemgrpc.DefaultKeyMetadata, key)
		}
		if client != "" {
			md = append(md, "x-client", client)
		}
		a := call(conn, methods[path], &structpb.Struct{Fields: map[string]*structpb.Value{fieldItem: structpb.NewStringValue("book")}}, new(structpb.Struct), md...)
		if want == (table.Answer{}) {
			if a.err != nil {
				t.Errorf("%s: %v, want a reply", path, a.err)
			}
			return
		}
		answered[want] = true
		st := status.Convert(a.err)
		var reason string
		var retryInfo bool
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.ErrorInfo:
				reason = d.GetReason()
			case *errdetails.RetryInfo:
				retryInfo = true
			}
		}
		if a.err == nil || st.Code() != codes.Code(want.Code) || reason != want.Reason {
			t.Errorf("%s: %v (reason %s), want the table's %v %s", path, a.err, reason, codes.Code(want.Code), want.Reason)
		}
		pushback := a.trailer.Get("grpc-retry-pushback-ms")
		if (len(pushback) == 1) != want.Retry || retryInfo != want.Retry {
			t.Errorf("%s, %s: pushback %q, RetryInfo %v; want both: %v", path, want.Reason, pushback, retryInfo, want.Retry)
		}
	}

	// sub runs a subtest, and counts those that ran: a -run that leaves
	// some out leaves their answers unserved, and the check of the whole
	// table below is then not made.
	started, ran := 0, 0
	sub := func(name string, f func(t *testing.T)) {
		started++
		t.Run(name, func(t *testing.T) {
			ran++
			f(t)
		})
	}
	for o, a := range table.Outcomes {
		sub("outcome/"+o.String(), func(t *testing.T) {
			res, rerr = idem.Result{Outcome: o, Response: stored}, nil
			for path := range methods {
				check(t, path, "k", "alice", a)
			}
		})
	}
	sub("outcome/undefined", func(t *testing.T) {
		res, rerr = idem.Result{}, nil
		want, _ := table.Outcome(0)
		for path := range methods {
			check(t, path, "k", "alice", want)
		}
	})
	for path, rules := range map[string]*table.Rules{"DoTx": &table.DoTx, "Run": &table.Run} {
		errs := map[error]table.Answer{errors.New("a database's own error"): rules.Default}
		for _, rule := range rules.Match {
			errs[rule.Err] = rule.Answer
		}
		for _, sentinel := range rules.Rest {
			errs[sentinel] = rules.Default
		}
		for sentinel, want := range errs {
			sub(path+"/"+sentinel.Error(), func(t *testing.T) {
				res, rerr = idem.Result{}, fmt.Errorf("idem: wrapped: %w", sentinel)
				check(t, path, "k", "alice", want)
			})
		}
	}
	sub("before the runner", func(t *testing.T) {
		res, rerr = idem.Result{}, errors.New("the runner must not be reached")
		for path := range methods {
			check(t, path, "", "alice", table.KeyRequired)
			check(t, path, strings.Repeat("k", 256), "alice", table.InvalidKey)
			check(t, path, "k", "", table.ClientUnknown)
		}
	})
	if ran < started {
		t.Logf("%d of %d subtests ran: not checking that every answer of the table was served", ran, started)
		return
	}
	for _, a := range table.All {
		if !answered[a] {
			t.Errorf("no call got the table's %s: the test does not hold the interceptor to it", a.Reason)
		}
	}
}

// TestReasonsAndCodesAreTheTable holds the exported reasons to the
// table's, one constant for each answer, and the table's codes, which it
// holds as numbers so that idemhttp needs no gRPC, to grpc-go's.
func TestReasonsAndCodesAreTheTable(t *testing.T) {
	reasons := map[string]table.Answer{
		idemgrpc.ReasonKeyRequired:      table.KeyRequired,
		idemgrpc.ReasonInvalidKey:       table.InvalidKey,
		idemgrpc.ReasonClientUnknown:    table.ClientUnknown,
		idemgrpc.ReasonKeyReused:        table.KeyReused,
		idemgrpc.ReasonInFlight:         table.InFlight,
		idemgrpc.ReasonConflict:         table.Conflict,
		idemgrpc.ReasonOutcomeUnknown:   table.OutcomeUnknown,
		idemgrpc.ReasonUnfinished:       table.Unfinished,
		idemgrpc.ReasonResponseTooLarge: table.ResponseTooLarge,
		idemgrpc.ReasonRecordDamaged:    table.RecordDamaged,
		idemgrpc.ReasonInternal:         table.InternalError,
	}
	if len(reasons) != len(table.All) {
		t.Errorf("%d reasons for the %d answers of the table", len(reasons), len(table.All))
	}
	for reason, a := range reasons {
		if a.Reason != reason {
			t.Errorf("the constant %s stands for the table's %s", reason, a.Reason)
		}
	}
	for c, want := range map[table.Code]codes.Code{
		table.InvalidArgument:    codes.InvalidArgument,
		table.FailedPrecondition: codes.FailedPrecondition,
		table.Internal:           codes.Internal,
		table.Unavailable:        codes.Unavailable,
		table.DataLoss:           codes.DataLoss,
		table.Unauthenticated:    codes.Unauthenticated,
	} {
		if codes.Code(c) != want {
			t.Errorf("the table's code %d is %v, want %v", c, codes.Code(c), want)
		}
	}
}
