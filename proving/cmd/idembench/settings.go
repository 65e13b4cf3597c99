package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
)

// measureSettings compares the claimed and replay paths under each driver
// setting, with the server's commits as they are: idem's on database/sql,
// and idempgx's on the native setting (native.go).
func measureSettings(ctx context.Context, c config, variants []database) error {
	fmt.Println("\ndriver settings:")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "driver and setting\tclaimed/s\tp50\treplay/s\tp50\t")
	for _, v := range variants {
		claimed, replay := claimedPath, replayPath
		if v.native {
			claimed, replay = nativeClaimedPath, nativeReplayPath
		}
		cl, err := claimed.run(ctx, c, v)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		rp, err := replay.run(ctx, c, v)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.0f\t%s\t\n", v.name, cl.rate(), ms(pct(cl.lat, 0.5)), rp.rate(), ms(pct(rp.lat, 0.5)))
	}
	return tw.Flush()
}
