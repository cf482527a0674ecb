package schedule

import (
	"testing"
	"time"
)

func BenchmarkNext(b *testing.B) {
	for _, zone := range []string{"UTC", "America/New_York"} {
		for _, expr := range []string{"*/5 * * * *", "0 ? * * *", "30 9 * * 1-5", "0 0 L * *", "@every 1h"} {
			s := mustParse(b, expr, "nightly-report", zone)
			// Start from 1024 instants spread over a year, so the
			// transitions of the zone are among them.
			var starts [1024]time.Time
			base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			for i := range starts {
				starts[i] = base.Add(time.Duration(i) * 8563 * time.Second * 3)
			}
			b.Run(zone+"/"+expr, func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if _, ok := s.Next(starts[i&1023]); !ok {
						b.Fatal("no next")
					}
					i++
				}
			})
		}
	}
}
