package idemgrpc

import (
	"strings"
	"testing"
)

// TestParseKey covers what a gRPC client refuses to send (control and
// non-ASCII characters in a text value), which the end-to-end tests cannot
// reach.
func TestParseKey(t *testing.T) {
	for _, c := range []struct {
		values  []string
		key     string
		present bool
		reason  string
	}{
		{nil, "", false, ""},
		{[]string{"k"}, "k", true, ""},
		{[]string{`"quoted"`}, `"quoted"`, true, ""}, // no quoted form: the quotes are the key's
		{[]string{"a key"}, "a key", true, ""},
		{[]string{strings.Repeat("k", MaxClientKeyLength)}, strings.Repeat("k", MaxClientKeyLength), true, ""},
		{[]string{""}, "", true, "empty"},
		{[]string{"a", "a"}, "", true, "more than once"},
		{[]string{strings.Repeat("k", MaxClientKeyLength+1)}, "", true, "longer than 255"},
		{[]string{"k\x00"}, "", true, "control or non-ASCII"},
		{[]string{"k\t"}, "", true, "control or non-ASCII"},
		{[]string{"k\x7f"}, "", true, "control or non-ASCII"},
		{[]string{"straße"}, "", true, "control or non-ASCII"},
		{[]string{" k"}, "", true, "space"},
		{[]string{"k "}, "", true, "space"},
		{[]string{" "}, "", true, "space"},
	} {
		key, present, err := parseKey(c.values)
		switch {
		case c.reason == "" && (err != nil || key != c.key || present != c.present):
			t.Errorf("parseKey(%q) = %q, %v, %v; want %q, %v", c.values, key, present, err, c.key, c.present)
		case c.reason != "" && (err == nil || !strings.Contains(err.reason, c.reason) || !present):
			t.Errorf("parseKey(%q) = %q, %v, %v; want an error about %q", c.values, key, present, err, c.reason)
		}
	}
}
