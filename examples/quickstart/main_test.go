package main

import (
	"context"
	"path/filepath"
	"testing"
)

// TestRun runs the demo twice on one database: the second run's first
// request is a retry too, so it must not place another order either.
func TestRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shop.db")
	for i := 0; i < 2; i++ {
		if err := run(context.Background(), path); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
}
