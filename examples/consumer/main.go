// Command consumer applies orders from a NATS JetStream queue to a SQLite
// database exactly once, although the broker delivers them at least once.
//
// Each message carries its own id in the Nats-Msg-Id header. The consumer
// runs Store.DoTx with that id as the key, writes the order in the same
// transaction as the key's record, and acknowledges the message only after
// the commit. A consumer that dies between the commit and the ack gets the
// message again after the ack wait; the key then answers Replay, the order
// is not placed twice, and the message is acknowledged.
//
//	go run . server                  # NATS with JetStream on 127.0.0.1:4222
//	go run . consume -db orders.db   # the consumer, until Ctrl-C
//	go run . publish order-1 '{"customer":"acme","item":"book","quantity":1}'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage:
  consumer server  [-listen 127.0.0.1:4222] [-store DIR]   run NATS with JetStream
  consumer consume [-nats URL] [-db FILE]                   apply orders until interrupted
  consumer publish [-nats URL] ID PAYLOAD                   publish one order with its id
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1], os.Args[2:])
	switch {
	case errors.Is(err, flag.ErrHelp): // -h: the flags are printed
	case err != nil:
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cmd string, args []string) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	natsURL := func() *string { return fs.String("nats", "nats://127.0.0.1:4222", "NATS server URL") }
	switch cmd {
	case "server":
		listen := fs.String("listen", "127.0.0.1:4222", "address to listen on")
		store := fs.String("store", "", "JetStream store directory (default: a new temporary directory)")
		if err := fs.Parse(args); err != nil {
			return err
		}
		return serve(ctx, *listen, *store)
	case "consume":
		url := natsURL()
		db := fs.String("db", "orders.db", "SQLite database file, created if missing")
		if err := fs.Parse(args); err != nil {
			return err
		}
		logger := slog.New(slog.NewTextHandler(os.Stdout, nil))
		return consume(ctx, consumerConfig{NATSURL: *url, DBPath: *db, Log: logger})
	case "publish":
		url := natsURL()
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 2 {
			return fmt.Errorf("publish wants an id and a payload\n%s", usage)
		}
		ack, err := publishOnce(ctx, *url, fs.Arg(0), []byte(fs.Arg(1)))
		if err != nil {
			return err
		}
		if ack.Duplicate {
			fmt.Printf("duplicate of message %d: JetStream dropped it (same id within the stream's duplicate window)\n", ack.Sequence)
		} else {
			fmt.Printf("stored as message %d of stream %s\n", ack.Sequence, ack.Stream)
		}
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, usage)
}
