package node

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
	"paxcron/internal/fakenomad"
	"paxcron/paxos"
)

// cronTrio is trio in cron mode over nomad; canLaunch, when set, is every
// replica's CronOptions.CanLaunch.
func cronTrio(t *testing.T, nomad *fakenomad.Nomad, canLaunch func() bool) []*Node {
	return trio(t, func(c *Config) {
		c.Cron = &CronOptions{
			Launcher: launcher.Config{
				MemoryHorizon: time.Hour, RetryAfter: 50 * time.Millisecond,
				ProposalTimeout: time.Second, MaxCallLatency: 100 * time.Millisecond,
			},
			NewDispatcher: nomad.Dispatcher,
			CanLaunch:     canLaunch,
		}
	})
}

// waitFor polls cond in the bubble's fake time, failing after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A leader whose CanLaunch turns false and then true again in the same
// ballot launches again. Its launcher was demoted and promoted again in
// the term whose Takeover the state had already applied; its second
// Takeover of that term was refused as stale, and it waited for it for
// ever: the status said Launching while nothing was launched.
func TestCanLaunchAgainInTheSameTermLaunches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Every answer comes from a goroutine of its own.
		nomad := fakenomad.New(fakenomad.Options{})
		var can atomic.Bool
		can.Store(true)
		nodes := cronTrio(t, nomad, can.Load)
		leader := leaderOf(t, nodes)
		waitFor(t, 10*time.Second, "no launcher leads", func() bool { return leader.Status().Launching })
		ballot := leader.Status().Ballot
		put := state.PutJob{Name: "j", Spec: state.JobSpec{Schedule: "* * * * * *", NomadJob: "batch"}, At: time.Now()}
		if err := leader.ProposeCommand(context.Background(), put); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "no dispatch", func() bool { return len(nomad.Children()) >= 2 })

		can.Store(false)
		waitFor(t, 10*time.Second, "still launching with CanLaunch false", func() bool { return !leader.Status().Launching })
		can.Store(true)
		waitFor(t, 10*time.Second, "not launching again", func() bool { return leader.Status().Launching })
		before := len(nomad.Children())
		time.Sleep(5 * time.Second)
		if s := leader.Status(); s.Role != paxos.Leader || s.Ballot != ballot {
			t.Skipf("leadership changed meanwhile (%v, ballot %v, was %v)", s.Role, s.Ballot, ballot)
		}
		if got := len(nomad.Children()); got < before+3 {
			t.Errorf("%d dispatches in the 5 s after CanLaunch turned true again (%d before), want one a second", got-before, before)
		}
	})
}

// A cron trio is named once, the same on all three, and in each one's
// Status, even while CanLaunch holds every launcher back (Nomad not
// checked yet): the transport binds the name, which must not wait for
// Nomad.
func TestTrioIsNamedWhileHeldBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := cronTrio(t, fakenomad.New(fakenomad.Options{}), func() bool { return false })
		waitFor(t, 10*time.Second, "the trio named", func() bool {
			id := nodes[0].Status().ClusterID
			for _, n := range nodes {
				if s := n.Status(); s.ClusterID.IsZero() || s.ClusterID != id {
					return false
				}
			}
			return true
		})
		for _, n := range nodes {
			if n.Status().Launching {
				t.Fatalf("replica %d launches with CanLaunch false", n.Status().ID)
			}
		}
	})
}
