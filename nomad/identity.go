package nomad

import (
	"fmt"
	"strings"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
)

// The meta keys every child carries beside its job's own meta. The parent
// job must accept them: list them in its parameterized block's
// meta_optional, or Nomad refuses the dispatch ("unpermitted metadata
// keys").
const (
	// MetaIdentity is the launch's identity, also the idempotency token.
	MetaIdentity = "paxcron_identity"
	// MetaJob is the cron job's name.
	MetaJob = "paxcron_job"
	// MetaScheduledAt is the launch's scheduled time, RFC 3339 in UTC.
	MetaScheduledAt = "paxcron_scheduled_at"
	// MetaPrefix is reserved: a job's own meta may not use it.
	MetaPrefix = state.ReservedMetaPrefix
)

// MaxIdentityBytes bounds an identity: a job name (state.MaxNameBytes), a
// dash, the Unix seconds and "-manual", with room to spare.
const MaxIdentityBytes = 256

// Launch is one dispatch: the parameterized job and its scope, the launch
// it is for, and what it passes to the child.
type Launch struct {
	// Target is the parent job, namespace and region; empty namespace and
	// region take the Config's.
	Target state.Target
	// Job is the cron job's name.
	Job string
	// Identity is the launch's identity (state.LaunchIdentity): the
	// idempotency token and the child ID's prefix template.
	Identity    string
	ScheduledAt time.Time
	Meta        map[string]string
	Payload     []byte
}

// LaunchOf is the dispatch an OpDispatch request asks for.
func LaunchOf(r launcher.Request) Launch {
	return Launch{
		Target:      r.Spec.Target(),
		Job:         r.Job,
		Identity:    r.Identity,
		ScheduledAt: r.ScheduledAt,
		Meta:        r.Spec.Meta,
		Payload:     r.Spec.Payload,
	}
}

// validIdentity checks an identity: it goes into a job ID, a list prefix
// and a filter's quoted string, so it is held to the characters of a cron
// job's name ([a-zA-Z0-9_.-], state.ValidName), which need no escaping in
// any of them.
func validIdentity(id string) error {
	if id == "" || len(id) > MaxIdentityBytes {
		return fmt.Errorf("identity must be 1 to %d bytes, got %d", MaxIdentityBytes, len(id))
	}
	for i := 0; i < len(id); i++ {
		if !nameByte(id[i]) {
			// In hex: printed as a rune, the first byte of "é" read 'Ã'.
			return fmt.Errorf("identity %q: byte %d (%#02x) is not one of [a-zA-Z0-9_.-]", id, i, id[i])
		}
	}
	return nil
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// DispatchMeta is the meta a launch's child is dispatched with: the job's
// own meta and the three paxcron_ keys. A job meta key with the reserved
// prefix is an error.
func DispatchMeta(l Launch) (map[string]string, error) {
	if err := validIdentity(l.Identity); err != nil {
		return nil, err
	}
	meta := make(map[string]string, len(l.Meta)+3)
	for k, v := range l.Meta {
		if strings.HasPrefix(k, MetaPrefix) {
			return nil, fmt.Errorf("meta key %q: the prefix %q is paxcron's own", k, MetaPrefix)
		}
		meta[k] = v
	}
	meta[MetaIdentity] = l.Identity
	meta[MetaJob] = l.Job
	meta[MetaScheduledAt] = l.ScheduledAt.UTC().Format(time.RFC3339)
	return meta, nil
}

// ChildPrefix is the prefix of every child dispatched for identity:
// Nomad names a child <parent>/dispatch-<IdPrefixTemplate>-<unix>-<8 hex>.
func ChildPrefix(parent, identity string) string {
	return parent + "/dispatch-" + identity + "-"
}

// maxUnixDigits bounds the seconds in a child's name: an int64's digits.
const maxUnixDigits = 19

// isChildOf reports whether child is named as a child of parent
// dispatched with identity as its prefix template: ChildPrefix, then
// digits, a dash and 8 hex digits, and nothing else. A child of a longer
// identity that shares the prefix ("<identity>-manual") does not match.
func isChildOf(child, parent, identity string) bool {
	rest, ok := strings.CutPrefix(child, ChildPrefix(parent, identity))
	if !ok {
		return false
	}
	secs, hex, ok := strings.Cut(rest, "-")
	if !ok || secs == "" || len(secs) > maxUnixDigits || len(hex) != 8 {
		return false
	}
	for i := 0; i < len(secs); i++ {
		if secs[i] < '0' || secs[i] > '9' {
			return false
		}
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// tokenFilter is the /v1/jobs filter that keeps the child dispatched with
// identity as its token (identity is checked: no quote to escape).
func tokenFilter(identity string) string {
	return `DispatchIdempotencyToken == "` + identity + `"`
}
