// Package api owns paxcron's HTTP API as it travels: the JSON bodies of
// every /v1 request and response (and a job write's msgpack,
// MsgpackContentType), their validation limits, and a Client
// for them that the CLI and the tests use. The server (internal/server)
// serves them; nothing here knows how.
//
// Conventions: times are RFC 3339 in UTC, durations Go duration strings
// ("10m"), payloads base64 (JSON's []byte). Every error is an Error body
// with an HTTP status: 400 a bad request (the message says what to
// change), 401 no or unknown token, 403 a read-only token on a write, 404
// no such job, 409 a conflicting write (a version changed since it was
// read), 413 a body over MaxBodyBytes, 503 no leader now (retry: the
// Retry-After header says when), 502 the leader could not be reached.
package api

import (
	"encoding/json"
	"fmt"
	"time"
)

// Limits on what the server reads.
const (
	// MaxBodyBytes bounds a request body: a file of cron jobs
	// (cronfile.MaxFileBytes) with room for JSON's overhead.
	MaxBodyBytes = 4 << 20
	// MaxJobsPerRequest bounds the jobs one write puts.
	MaxJobsPerRequest = 1000
	// MaxNextLaunches bounds the next launch times a job read returns.
	MaxNextLaunches = 100
)

// Error is every error's body.
type Error struct {
	// Message says what went wrong and, where it can, what to do.
	Message string `json:"error"`
	// Leader is the replica that leads, when the request needs it and
	// this replica could not forward it (0 if none is known).
	Leader uint64 `json:"leader,omitempty"`
	// NotDone, on an error that could otherwise leave the outcome open
	// (a 502: something upstream failed), says the server did nothing:
	// the call is safe to retry.
	NotDone bool `json:"not_done,omitempty"`
	// Status is the HTTP status (not encoded: the response carries it).
	Status int `json:"-"`
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
	}
	return e.Message
}

// Spec is a cron job as written, in JSON: the same fields as a cron block
// of HCL (cron/cronfile).
type Spec struct {
	Schedule      string            `json:"schedule"`
	TimeZone      string            `json:"time_zone,omitempty"`
	Concurrency   string            `json:"concurrency,omitempty"`
	CatchupWindow Duration          `json:"catchup_window,omitempty"`
	Delivery      string            `json:"delivery,omitempty"` // "at-most-once" (default) or "at-least-once"
	NomadJob      string            `json:"nomad_job"`
	Namespace     string            `json:"namespace,omitempty"`
	Region        string            `json:"region,omitempty"`
	Meta          map[string]string `json:"meta,omitempty"`
	Payload       []byte            `json:"payload,omitempty"`
}

// PutJob is one job to create or replace.
type PutJob struct {
	Name string `json:"name"`
	Spec Spec   `json:"spec"`
	// IfVersion, when set, makes the write conditional: 0 means the job
	// must not exist, N that its version must be N. Unset: create or
	// replace whatever is there.
	IfVersion *uint64 `json:"if_version,omitempty"`
}

// PutJobs is the body of POST /v1/jobs.
type PutJobs struct {
	Jobs []PutJob `json:"jobs"`
	// SkipNomadCheck writes the jobs without first asking Nomad whether it
	// will accept their dispatches (nomad.CheckSpec).
	SkipNomadCheck bool `json:"skip_nomad_check,omitempty"`
}

// PutResult is what a write did to one job.
type PutResult struct {
	Name    string `json:"name"`
	Version uint64 `json:"version"`
	// Created, or else updated; Unchanged when the spec was the same and
	// nothing was written.
	Created   bool `json:"created,omitempty"`
	Unchanged bool `json:"unchanged,omitempty"`
	// Resolved is the schedule with ? and H replaced.
	Resolved string `json:"resolved_schedule"`
}

// PutJobsResult is the answer to POST /v1/jobs.
type PutJobsResult struct {
	Jobs []PutResult `json:"jobs"`
}

// Launch is one launch of a job.
type Launch struct {
	Job         string    `json:"job"`
	Identity    string    `json:"identity"`
	ScheduledAt time.Time `json:"scheduled_at"`
	// Kind is "scheduled", "manual" or "backfill".
	Kind string `json:"kind"`
	// StartedAt is when the leader proposed it.
	StartedAt time.Time `json:"started_at"`
	// Outcome is "dispatched", "failed", "skipped" or "unknown", or
	// "open" while it is not concluded.
	Outcome string `json:"outcome"`
	// ChildID is the child dispatched, or, for a skip under concurrency
	// forbid, the child still running that the skip found.
	ChildID string `json:"child_id,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Force   bool   `json:"force,omitempty"`
}

// Counters count a job's launches by outcome.
type Counters struct {
	Started    uint64 `json:"started"`
	Dispatched uint64 `json:"dispatched"`
	Failed     uint64 `json:"failed"`
	Skipped    uint64 `json:"skipped"`
	Unknown    uint64 `json:"unknown"`
}

// JobSummary is a job in a listing.
type JobSummary struct {
	Name     string     `json:"name"`
	Version  uint64     `json:"version"`
	Schedule string     `json:"schedule"`
	Resolved string     `json:"resolved_schedule"`
	TimeZone string     `json:"time_zone"`
	Paused   bool       `json:"paused"`
	NomadJob string     `json:"nomad_job"`
	NextAt   *time.Time `json:"next_at,omitempty"`
	// Ended is set when the job's schedule has no launch after its last
	// one within reach (ten years: cron/schedule.SearchYears): it launches
	// nothing more, paused or not, until its schedule is edited. The API
	// refuses such a schedule when it is written; a job written before
	// that check, or whose launches lapse past year 9999, can still end.
	Ended bool `json:"ended,omitempty"`
	// Last is the newest finished launch, if any.
	Last *Launch `json:"last,omitempty"`
	Open int     `json:"open"`
}

// Job is one job, read whole.
type Job struct {
	JobSummary
	Spec      Spec      `json:"spec"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Next are the next launch times after now (MaxNextLaunches at most).
	Next    []time.Time `json:"next"`
	OpenAll []Launch    `json:"open_launches"`
	// History is the job's recent finished launches, newest first.
	History  []Launch `json:"history"`
	Counters Counters `json:"counters"`
}

// Jobs is the answer to GET /v1/jobs.
type Jobs struct {
	Jobs []JobSummary `json:"jobs"`
	// Index is the log slot the answer reflects.
	Index uint64 `json:"index"`
}

// Trigger is the body of POST /v1/jobs/{name}/trigger.
type Trigger struct {
	// Force ignores the job's pause and concurrency policy.
	Force bool `json:"force,omitempty"`
}

// Backfill is the body of POST /v1/jobs/{name}/backfill.
type Backfill struct {
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
	Force bool      `json:"force,omitempty"`
}

// Done answers a write that has nothing else to say.
type Done struct {
	// Index is the log slot the write was applied at.
	Index uint64 `json:"index"`
}

// Replica is one member of the cluster, as this replica sees it.
type Replica struct {
	ID        uint64 `json:"id"`
	PaxosAddr string `json:"paxos_addr,omitempty"`
	APIAddr   string `json:"api_addr,omitempty"`
	// Health is "alive", "suspect", "unknown" (never heard of), or "self".
	Health string `json:"health"`
}

// Status is the answer to GET /v1/status: this replica's view.
type Status struct {
	Replica uint64 `json:"replica"`
	// ClusterID is the cluster's ID as this replica's state holds it
	// (32 hex digits), empty until the cluster is named or, for a replica
	// rebuilding, until it catches up that far. Every replica of one
	// cluster shows the same; replicas of two refuse each other.
	ClusterID string `json:"cluster_id,omitempty"`
	// Role is "leader", "follower", "candidate", "pre-candidate".
	Role   string `json:"role"`
	Leader uint64 `json:"leader"`
	// LeaderAPI is the leader's API address, when known.
	LeaderAPI string `json:"leader_api,omitempty"`
	Ballot    string `json:"ballot,omitempty"`
	Chosen    uint64 `json:"chosen"`
	Applied   uint64 `json:"applied"`
	// Lease is how long this replica still holds the leader's lease.
	Lease Duration `json:"lease,omitempty"`
	// Launching: this replica launches (it leads, holds the lease and
	// caught up).
	Launching bool `json:"launching"`
	// Rebuilding: this replica lost its disk and catches up from its
	// peers; it votes again once it cannot contradict what it forgot.
	Rebuilding bool `json:"rebuilding,omitempty"`
	// StateHash is a running hash of every command applied, equal on
	// replicas that applied the same prefix.
	StateHash string `json:"state_hash"`
	Jobs      int    `json:"jobs"`
	Open      int    `json:"open_launches"`
	// LastSnapshot is the index of this replica's newest snapshot.
	LastSnapshot uint64      `json:"last_snapshot"`
	LastBackup   *BackupInfo `json:"last_backup,omitempty"`
	Replicas     []Replica   `json:"replicas"`
	// SettingsCompared: gossip runs, so this replica compares the
	// settings every replica must hold alike (backup.url, nomad.address,
	// nomad.region, nomad.namespace...) with its peers'; SettingsDiffer
	// lists the peers whose differ.
	SettingsCompared bool             `json:"settings_compared"`
	SettingsDiffer   []SettingsDiffer `json:"settings_differ,omitempty"`
	Version          string           `json:"version"`
	Time             time.Time        `json:"time"`
}

// SettingsDiffer is a peer whose shared settings differ from the
// replica's that answers: their names, never their values.
type SettingsDiffer struct {
	Replica  uint64   `json:"replica"`
	Settings []string `json:"settings"`
}

// BackupInfo describes one backup of a snapshot.
type BackupInfo struct {
	// Generation ranks backups before Index (storage/backup).
	Generation uint64    `json:"generation,omitempty"`
	Index      uint64    `json:"index"`
	TakenAt    time.Time `json:"taken_at"`
	Key        string    `json:"key"`
	Size       int64     `json:"size"`
	SHA256     string    `json:"sha256"`
	// ClusterID is the cluster's whose state it holds, "" for none.
	ClusterID string `json:"cluster_id,omitempty"`
}

// Duration is a time.Duration that travels as a Go duration string.
type Duration time.Duration

// MarshalJSON writes "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "1m30s" (or a number of nanoseconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("a duration is a string such as \"10m\": %s", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// CheckPathName refuses a job name no path of the API can hold:
// state.ValidName allows "." and "..", but /v1/jobs/.. is cleaned to
// /v1/, so such a job could not be read or deleted. The server refuses
// them in writes, and cron files before they are sent.
func CheckPathName(name string) error {
	if name == "." || name == ".." {
		return fmt.Errorf("%q: a name of dots only cannot be used in the API's paths (/v1/jobs/.. is /v1/)", name)
	}
	return nil
}
