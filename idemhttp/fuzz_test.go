package idemhttp

import (
	"strings"
	"testing"
)

// FuzzParseKey feeds the key header parser arbitrary header values. Its seed
// corpus runs with the normal tests; go test -fuzz FuzzParseKey explores
// further.
func FuzzParseKey(f *testing.F) {
	for _, v := range []string{
		"", " ", "\t", "k", "order-1", " padded\t", "a b", `"abc"`, `"a\"b\\c"`, `""`, `"`, `"abc`,
		`"abc\"`, `"a\bc"`, `"abc";v=1`, `"abc"def`, `" lead"`, `"\""`, "a\x00b", "a\x7fb",
		"schl\xc3\xbcssel", "\xff\xfe", strings.Repeat("k", MaxClientKeyLength), strings.Repeat("k", MaxClientKeyLength+1),
		`"` + strings.Repeat("k", MaxClientKeyLength) + `"`, `"` + strings.Repeat(`\\`, MaxClientKeyLength) + `"`,
	} {
		f.Add(v, false)
	}
	f.Add("k", true)
	f.Fuzz(func(t *testing.T, v string, twice bool) {
		values := []string{v}
		if twice {
			values = append(values, v)
		}
		key, present, err := parseKey(values)
		if !present {
			t.Fatalf("parseKey(%q) says no header was sent", values)
		}
		if err != nil {
			if key != "" || err.reason == "" {
				t.Fatalf("parseKey(%q) = %q with error %q: a refusal must carry no key and a reason", values, key, err.reason)
			}
		}
		if twice {
			if err == nil {
				t.Fatalf("parseKey(%q) = %q, accepting a header sent twice", values, key)
			}
			return
		}

		// A value that does not start with a quote is a plain token: the
		// key is the value without its surrounding blanks, if that is
		// a valid key.
		plain := strings.Trim(v, " \t")
		if !strings.HasPrefix(plain, `"`) {
			if valid := validKey(plain); valid != (err == nil) || (valid && key != plain) {
				t.Fatalf("parseKey(%q) = %q, %v; want %q accepted: %v", v, key, err, plain, valid)
			}
		}
		if err != nil {
			return
		}
		if !validKey(key) {
			t.Fatalf("parseKey(%q) accepted %q, which is not 1 to %d printable ASCII characters", v, key, MaxClientKeyLength)
		}

		// Quoting the key again names the same key.
		quoted := quote(key)
		if again, _, err := parseKey([]string{quoted}); err != nil || again != key {
			t.Fatalf("parseKey(%q) = %q, %v; want %q, the key of %q", quoted, again, err, key, v)
		}
		// So does the plain token, where the key can be sent as one: it
		// neither starts with a quote nor has blanks around it.
		if key == strings.Trim(key, " \t") && !strings.HasPrefix(key, `"`) {
			if again, _, err := parseKey([]string{key}); err != nil || again != key {
				t.Fatalf("parseKey(%q) = %q, %v; want %q, the key of %q", key, again, err, key, v)
			}
		}
	})
}

// validKey reports whether k is 1 to MaxClientKeyLength printable ASCII characters.
func validKey(k string) bool {
	if k == "" || len(k) > MaxClientKeyLength {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// quote writes k as an RFC 8941 sf-string.
func quote(k string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k) + `"`
}
