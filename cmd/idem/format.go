package main

import (
	"fmt"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

// timeLayout shows the full precision of the table, microseconds, in UTC, so
// that what an operator reads matches created_at and expires_at exactly.
const timeLayout = "2006-01-02 15:04:05.000000 UTC"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// relative says how far t is from now: "3m12s ago" or "in 23h56m".
func relative(t, now time.Time) string {
	if d := t.Sub(now); d > 0 {
		return "in " + span(d)
	}
	return span(now.Sub(t)) + " ago"
}

// span writes a duration for a human, to the second, and leaves out the
// smaller units once it runs to hours or days: "45s", "3m12s", "23h56m",
// "2d3h".
func span(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh%dm", d/time.Hour, d%time.Hour/time.Minute)
	}
	return d.String()
}

// byteSize writes n bytes with a binary unit: "48.0 KiB (49152 bytes)".
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	v, u := float64(n)/unit, "KiB"
	for _, next := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, u = v/unit, next
	}
	return fmt.Sprintf("%.1f %s (%d bytes)", v, u, n)
}

// printable reports whether b is UTF-8 text that is safe to write to a
// terminal: no control characters but newlines and tabs, so that a stored
// body cannot move the cursor or change the terminal's settings.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r != '\n' && r != '\t' && r != '\r' && !unicode.IsGraphic(r) {
			return false
		}
	}
	return true
}

// cut returns at most n bytes of b, ending on a character boundary.
func cut(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return b[:n]
}
