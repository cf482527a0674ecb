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

// BenchmarkParse: every restore parses every job's schedule again (a
// million of them in BenchmarkScale), so parsing must stay cheap.
func BenchmarkParse(b *testing.B) {
	for _, expr := range []string{"? ? * * *", "0 ? * * 1-5", "*/5 * * * *", "0 9,12,18 * * MON-FRI", "@every 5m"} {
		b.Run(expr, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := Parse(expr, Options{JobName: "team-001.job-0000001", TimeZone: "America/New_York"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
