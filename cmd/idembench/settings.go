package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
)

// measureSettings compares the claimed and replay paths under each driver
// setting, with the server's commits as they are.
func measureSettings(ctx context.Context, c config, variants []database) error {
	fmt.Println("\ndriver settings:")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "driver and setting\tclaimed/s\tp50\treplay/s\tp50\t")
	for _, v := range variants {
		cl, err := claimedPath.run(ctx, c, v)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		rp, err := replayPath.run(ctx, c, v)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.0f\t%s\t\n", v.name, cl.rate(), ms(pct(cl.lat, 0.5)), rp.rate(), ms(pct(rp.lat, 0.5)))
	}
	return tw.Flush()
}
