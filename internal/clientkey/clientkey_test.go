package clientkey

import (
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

// TestStoredKeyIsPinned holds StoredKey to the keys that the adapters
// stored before the rule was shared: a record written by an earlier build
// must still be found.
func TestStoredKeyIsPinned(t *testing.T) {
	for _, c := range []struct{ scope, key, want string }{
		{"", "k", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855:k"},
		{"acct_42", "order-1", "592f2119697cff2f2aacf33a931e1ded4cc882968b85ecff42fe1bafd3068b60:order-1"},
		{"tenant Ä", `a "quoted" key\`, `57de0f61aa3ae1239a3283d0016b5c4efb3e9893ea2da49fc890cd4384621116:a "quoted" key\`},
		{strings.Repeat("s", 300), "k:with:colons", "2955c7328c57ca39d0568bb930a5360e6b0e7f33931639c819d7cbfeaf0a88c7:k:with:colons"},
	} {
		if got := StoredKey(c.scope, c.key); got != c.want {
			t.Errorf("StoredKey(%.20q, %q) = %q, want %q", c.scope, c.key, got, c.want)
		}
	}
}

// TestStoredKeyFitsTheStore shows that the longest client key, under any
// scope, is a key that the Store takes, and that scopes do not share keys.
func TestStoredKeyFitsTheStore(t *testing.T) {
	long := StoredKey(strings.Repeat("s", 1<<16), strings.Repeat("k", MaxLength))
	if len(long) != StoredLength || StoredLength > idem.MaxStoredKeyBytes {
		t.Errorf("the longest stored key has %d bytes, StoredLength is %d; want them equal and at most idem.MaxStoredKeyBytes, %d",
			len(long), StoredLength, idem.MaxStoredKeyBytes)
	}
	if StoredKey("a", "k") == StoredKey("b", "k") || StoredKey("", "a:k") == StoredKey("a", "k") {
		t.Error("two scopes share a stored key")
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		key    string
		reason string // in Check's answer; "" for a key
	}{
		{"k", ""},
		{"a key", ""},
		{`"quoted"`, ""},
		{"~!#$%&'()*+,-./:;<=>?@[\\]^_`{|}", ""},
		{strings.Repeat("k", MaxLength), ""},
		{"", "empty"},
		{strings.Repeat("k", MaxLength+1), "longer than 255"},
		{strings.Repeat("k", MaxLength+1) + "\x00", "longer than 255"},
		{"k\x00", "control or non-ASCII"},
		{"k\t", "control or non-ASCII"},
		{"\x1fk", "control or non-ASCII"},
		{"k\x7f", "control or non-ASCII"},
		{"straße", "control or non-ASCII"},
		{"\xff", "control or non-ASCII"},
		{" k", "space"},
		{"k ", "space"},
		{" ", "space"},
	} {
		got := Check(c.key)
		if (c.reason == "") != (got == "") || !strings.Contains(got, c.reason) {
			t.Errorf("Check(%.40q) = %q, want %q", c.key, got, c.reason)
		}
	}
	if !strings.Contains(Check(strings.Repeat("k", MaxLength+1)), "255") {
		t.Error("the length's reason does not name MaxLength")
	}
}
