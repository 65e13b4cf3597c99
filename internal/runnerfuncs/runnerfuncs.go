// Package runnerfuncs is an idem.Runner made of two functions, which the
// tests of the adapters give them in place of another driver's Runner.
package runnerfuncs

import (
	"context"

	"github.com/idemgo/idem"
)

// Runner is an idem.Runner whose DoTx and Run call its functions.
type Runner struct {
	DoTxFunc func(ctx context.Context, key string, reqHash []byte, serve func(context.Context) (idem.Response, error)) (idem.Result, error)
	RunFunc  func(ctx context.Context, key string, reqHash []byte, steps []idem.Step) (idem.Result, error)
}

// DoTx calls r.DoTxFunc.
func (r Runner) DoTx(ctx context.Context, key string, reqHash []byte, serve func(context.Context) (idem.Response, error)) (idem.Result, error) {
	return r.DoTxFunc(ctx, key, reqHash, serve)
}

// Run calls r.RunFunc.
func (r Runner) Run(ctx context.Context, key string, reqHash []byte, steps []idem.Step) (idem.Result, error) {
	return r.RunFunc(ctx, key, reqHash, steps)
}
