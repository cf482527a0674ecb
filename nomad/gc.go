package nomad

import (
	"context"
	"errors"
	"fmt"
	"time"

	"paxcron/cron/state"
)

// ErrGCThreshold wraps the refusal of a Nomad server that forgets
// dispatches sooner than Config.JobGCThreshold says.
var ErrGCThreshold = errors.New("nomad: Nomad's job_gc_threshold is shorter than paxcron's JobGCThreshold")

// CheckGCThreshold reads the job_gc_threshold of the agent the client
// talks to (/v1/agent/self, which needs agent:read) and refuses one
// shorter than Config.JobGCThreshold: the launcher would trust a look-up
// that finds nothing after Nomad forgot the token, and launch twice.
// Known is false when the agent is not a server (a client agent cannot
// tell). Only the agent asked is checked; every server of the region
// should have the same setting, since the leader's GC is the one that
// runs.
func (c *Client) CheckGCThreshold(ctx context.Context) (threshold time.Duration, known bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	var self struct {
		Config struct {
			Server *struct {
				Enabled        bool
				JobGCThreshold string
			}
		} `json:"config"`
	}
	err = c.retry(ctx, func(ctx context.Context) error {
		return c.inSlot(ctx, "gc threshold", "/v1/agent/self", func(ctx context.Context) error {
			if _, err := c.api.Raw().Query("/v1/agent/self", &self, c.query(ctx, state.Target{})); err != nil {
				return callError("gc threshold", "/v1/agent/self", err)
			}
			return nil
		})
	})
	if err != nil {
		return 0, false, err
	}
	srv := self.Config.Server
	if srv == nil || !srv.Enabled {
		return 0, false, nil
	}
	threshold = DefaultJobGCThreshold // Nomad's default when unset
	if srv.JobGCThreshold != "" {
		if threshold, err = time.ParseDuration(srv.JobGCThreshold); err != nil {
			return 0, false, fmt.Errorf("%w: cannot read the agent's job_gc_threshold %q: %v", ErrGCThreshold, srv.JobGCThreshold, err)
		}
	}
	if threshold < c.cfg.JobGCThreshold {
		return threshold, true, fmt.Errorf("%w: the Nomad server keeps a finished child and its token for %v, paxcron counts on %v: "+
			"set JobGCThreshold to %v or less (the memory horizon is that less HorizonMargin)", ErrGCThreshold, threshold, c.cfg.JobGCThreshold, threshold)
	}
	return threshold, true, nil
}
