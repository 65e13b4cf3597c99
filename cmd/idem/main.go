// Command idem is the operator's tool for a service that keeps idempotency
// keys with package idem: it creates the table, purges expired keys, shows
// the record of one key, reports the state of the table, settles or
// releases a key left unfinished, forgets a finished one, lists the multi-step requests that have
// not finished, and runs a demo.
//
//	go run ./cmd/idem demo                 # the demo, on an embedded SQLite database
//	idem migrate -dsn 'postgres://app@db/shop'
//	idem inspect -dsn 'postgres://app@db/shop' -key order-7f3a
//	idem purge -dsn 'postgres://app@db/shop' -batch 5000
//	idem settle -dsn 'postgres://app@db/shop' -key order-7f3a -status 201 -body '{"order":7}'
//
// Run idem -h for the commands, and idem COMMAND -h for each one's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Exit statuses. Scripts rely on them, so they are part of the interface.
const (
	exitOK         = 0
	exitError      = 1 // the command failed at run time
	exitUsage      = 2 // bad command line: unknown command, bad flag, missing -dsn
	exitNotFound   = 3 // inspect, settle, release, forget: the key has no live record
	exitCorrupt    = 4 // inspect: the key's record does not match its checksum
	exitFinished   = 5 // settle, release: the key's request has finished
	exitHeld       = 6 // settle, release, forget: a live request holds the key, or the database is busy
	exitPhases     = 7 // release: a multi-step request has committed phases, and -phases-undone is missing
	exitUnfinished = 8 // forget: the key's request has not finished, and no live request holds it
)

// env is what a command may use of the world outside it. main fills it from
// the process; tests fill it with buffers, their own variables and a clock.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time
	// terminal tells whether stderr is a terminal, where a progress line
	// can be redrawn in place; elsewhere it would fill a log with noise.
	terminal bool
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

// commands are listed in the order an operator meets them.
var commands = []command{
	{"demo", "show retries, concurrent duplicates and a reused key on a demo table", runDemo},
	{"schema", "print the statements that create the table, for a migration tool", runSchema},
	{"migrate", "create the table and its index if they are missing", runMigrate},
	{"inspect", "show the stored record of one key", runInspect},
	{"stats", "count live and expired keys, and measure the table", runStats},
	{"purge", "delete expired keys, in batches", runPurge},
	{"settle", "store the response of a key left unfinished, for retries to replay", runSettle},
	{"release", "delete a key left unfinished whose request had no effect", runRelease},
	{"forget", "delete a finished key before its window ends, so that it runs anew", runForget},
	{"unfinished", "list the multi-step requests that have not finished, with their steps", runUnfinished},
}

// exitCodeError ends the command with a status other than exitError. A nil
// err means the command has already said all there is to say.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitCodeError) Unwrap() error { return e.err }

// usageError reports a bad command line, which exits with exitUsage.
func usageError(format string, args ...any) error {
	return &exitCodeError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	e := &env{
		stdout:   os.Stdout,
		stderr:   os.Stderr,
		getenv:   os.Getenv,
		now:      time.Now,
		terminal: isTerminal(os.Stderr),
	}
	code := run(ctx, e, os.Args[1:])
	stop()
	os.Exit(code)
}

// isTerminal reports whether f is a character device, as a terminal is.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// run dispatches args to a command and turns its error into an exit status,
// printing the error on stderr.
func run(ctx context.Context, e *env, args []string) int {
	err := dispatch(ctx, e, args)
	if err == nil {
		return exitOK
	}
	code := exitError
	var ce *exitCodeError
	if errors.As(err, &ce) {
		code = ce.code
		if ce.err == nil {
			return code
		}
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "idem: ") {
		msg = "idem: " + msg
	}
	fmt.Fprintln(e.stderr, msg)
	return code
}

func dispatch(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		usage(e.stderr)
		return &exitCodeError{code: exitUsage}
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help", "help":
		if name == "help" && len(rest) > 0 {
			if c, ok := lookupCommand(rest[0]); ok {
				return c.run(ctx, e, []string{"-h"})
			}
			return usageError("unknown command %q: run 'idem -h' for the list", rest[0])
		}
		usage(e.stdout)
		return nil
	}
	c, ok := lookupCommand(name)
	if !ok {
		if strings.HasPrefix(name, "-") {
			return usageError("flag %s before the command: write 'idem COMMAND %s ...'; run 'idem -h' for the commands", name, name)
		}
		return usageError("unknown command %q: run 'idem -h' for the list", name)
	}
	return c.run(ctx, e, rest)
}

func lookupCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func usage(w io.Writer) {
	fmt.Fprint(w, `idem looks after the table of idempotency keys that package idem keeps.

Usage:
  idem COMMAND [flags]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s  %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, `
The database flags, shared by migrate, inspect, stats, purge, settle,
release, forget and unfinished:
  -dsn      the data source name; default $IDEM_DSN. For SQLite, idem adds
            _txlock=immediate and _pragma=busy_timeout(5000) unless it sets
            its own, as the SQLite dialect needs
  -dialect  %s; default $IDEM_DIALECT, or
            inferred from the DSN (user:password@tcp(host)/db is mysql):
%s
  -table    the table of keys; default idempotency_keys
  -shard-column
            the kind of the table's shard column, for a table made with
            idem.WithShardColumn: int64, text(N), bytes(N) or uuid, as the
            service gives it (schema takes it too); inspect, settle,
            release and forget then need -shard, the record's shard value:
            decimal digits, the text, hex digits or 8-4-4-4-12
  -driver   %s

The commands that take a key, inspect, settle, release and forget, take it
with -key, as the client sent it; with -scope SCOPE for a key that came
through idemhttp or idemgrpc made with WithScope, or with -single-client for
one made with WithSingleClient.

Exit status, the same for every command that returns it:
  0  done
  1  failed: the database unreachable, the table missing, and the like
  2  bad command line: unknown command, bad flag, missing -dsn
  3  inspect, settle, release, forget: no live record for the key
  4  inspect: the key's record does not match its checksum
  5  settle, release: the key's request has finished
  6  settle, release, forget: a live request holds the key, or the
     database is busy: try again later
  7  release: a multi-step request past its first phase, without
     -phases-undone (see idem release -h)
  8  forget: the key's request has not finished, and no live request holds
     it: settle or release it
Scripts may rely on them. Run the command as go build or go install makes
it: go run ends with status 1 whenever the command does not end with 0.

Run 'idem COMMAND -h' for a command's flags and an example.
`, dialectNames(), dialectHelp("              "), driverHelp())
}

// parseFlags parses args with fs, and returns the positional arguments. Flags
// may come before or after them, so that an argument does not stop the
// parse of the flags after it; after "--", everything is positional. -h prints help
// on stdout and returns errHelp; a bad flag is a usage error.
func parseFlags(e *env, fs *flag.FlagSet, help string, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var positional []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(e.stdout, help)
			fmt.Fprintln(e.stdout, "\nFlags:")
			fs.SetOutput(e.stdout)
			fs.PrintDefaults()
			return nil, errHelp
		}
		if err != nil {
			return nil, usageError("%s: %v; run 'idem %s -h' for its flags", fs.Name(), err, fs.Name())
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if len(rest) == 0 || (consumed > 0 && args[consumed-1] == "--") {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// errHelp ends a command that printed its help, successfully.
var errHelp = &exitCodeError{code: exitOK}
