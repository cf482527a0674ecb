package nomad

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/api"

	"paxcron/cron/state"
)

// MinVersion is the oldest Nomad paxcron dispatches to.
const MinVersion = "1.11.2"

// ErrVersion wraps the refusal of a Nomad older than MinVersion, and the
// failure to read its version.
var ErrVersion = errors.New("nomad: unsupported Nomad version")

// CheckVersion reads the version of every alive Nomad server
// (/v1/agent/members, which needs node:read; else the agent's own,
// /v1/agent/self, which needs agent:read) and refuses a cluster where one
// is older than MinVersion: before 1.11.2 concurrent dispatches with one
// idempotency token could create several children, and exactly-once
// launches rest on the token. It returns the oldest version found.
func (c *Client) CheckVersion(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	var versions []string
	err := c.retry(ctx, func(ctx context.Context) error {
		return c.inSlot(ctx, "version", "/v1/agent/members", func(ctx context.Context) error {
			var err error
			versions, err = c.serverVersions(ctx)
			return err
		})
	})
	if err != nil {
		return "", fmt.Errorf("%w: cannot read the Nomad servers' version: %w", ErrVersion, err)
	}
	return checkVersions(versions)
}

// serverVersions returns the versions of the alive servers, or the
// agent's own when the members are not readable.
func (c *Client) serverVersions(ctx context.Context) ([]string, error) {
	q := c.query(ctx, state.Target{})
	members, err := c.api.Agent().MembersOpts(q)
	if err == nil {
		var vs []string
		for _, m := range members.Members {
			if m.Status == "alive" {
				vs = append(vs, m.Tags["build"])
			}
		}
		if len(vs) == 0 {
			return nil, &CallError{Op: "version", Subject: "/v1/agent/members", Status: 200, Message: "no alive server", Err: errors.New("no alive server")}
		}
		return vs, nil
	}
	membersErr := callError("version", "/v1/agent/members", err)
	if membersErr.Status != http.StatusForbidden {
		return nil, membersErr
	}
	var self api.AgentSelf
	if _, err := c.api.Raw().Query("/v1/agent/self", &self, q); err != nil {
		e := callError("version", "/v1/agent/self", err)
		if e.Permanent {
			e.Message = fmt.Sprintf("%s; and /v1/agent/members: %s: the token needs node:read or agent:read to check the Nomad version", e.Message, membersErr.Message)
		}
		return nil, e
	}
	v := self.Member.Tags["build"]
	if v == "" {
		return nil, &CallError{Op: "version", Subject: "/v1/agent/self", Status: 200, Message: "the agent reports no version", Err: errors.New("no build tag")}
	}
	return []string{v}, nil
}

// checkVersions returns the oldest of versions, or an error if it is
// older than MinVersion or unreadable.
func checkVersions(versions []string) (string, error) {
	var oldest string
	var oldestV version
	for _, s := range versions {
		v, err := parseVersion(s)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrVersion, err)
		}
		if oldest == "" || v.less(oldestV) {
			oldest, oldestV = s, v
		}
	}
	least, _ := parseVersion(MinVersion)
	if oldestV.less(least) {
		return oldest, fmt.Errorf("%w: Nomad %s is older than %s: before %s concurrent dispatches with one idempotency token "+
			"could create several children, and paxcron launches each job exactly once only through that token; upgrade the Nomad servers",
			ErrVersion, oldest, MinVersion, MinVersion)
	}
	return oldest, nil
}

// version is a Nomad version: major, minor, patch, and whether it is a
// prerelease (1.11.2-dev comes before 1.11.2).
type version struct {
	n          [3]int
	prerelease bool
}

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

func parseVersion(s string) (version, error) {
	m := versionRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return version{}, fmt.Errorf("cannot read the Nomad version %q", s)
	}
	var v version
	for i := range v.n {
		n, err := strconv.Atoi(m[i+1])
		if err != nil {
			return version{}, fmt.Errorf("cannot read the Nomad version %q: %v", s, err)
		}
		v.n[i] = n
	}
	v.prerelease = m[4] != ""
	return v, nil
}

func (v version) less(w version) bool {
	if c := slices.Compare(v.n[:], w.n[:]); c != 0 {
		return c < 0
	}
	return v.prerelease && !w.prerelease
}
