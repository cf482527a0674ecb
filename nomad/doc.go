// Package nomad owns paxcron's calls to Nomad, through the Go client
// github.com/hashicorp/nomad/api: dispatching a launch's child exactly
// once, looking a launch up by its identity, the forbid and replace
// policies' Running and Stop, and the checks made before relying on a
// cluster (CheckVersion, CheckGCThreshold). Cron files are read by
// cron/cronfile, not here.
//
// Client makes blocking calls, each bounded by a deadline: its context's,
// RequestTimeout, and CallTimeout per HTTP call once it is sent (the Go
// client has none of its own). Dispatcher is the launcher's launcher.Dispatcher over a
// Client: Submit never blocks, a bounded pool of workers makes the calls,
// and each launcher.Result goes back through a Deliver callback that the
// server drains on the launcher's thread into Launcher.Done.
//
// # Exactly once
//
// A launch's identity (state.LaunchIdentity, "<job>-<unix seconds>", or
// with "-manual") is Nomad's idempotency token and the child ID's prefix
// template, so the child is named <parent>/dispatch-<identity>-<unix>-<8
// hex>. Nomad returns a repeated token's child with an empty EvalID; any
// other reply is proved by reading the child back, because under
// concurrent dispatches with one token the losers get a 200 naming a child
// that does not exist, and are retried with the same token. Read-backs are
// batched: one /v1/jobs/statuses call proves the children of the
// dispatches made meanwhile (prove.go); a child it does not list is not
// proved, and its dispatch is made again with the same token. A failure of
// any kind leaves the outcome unknown: the dispatch is retried with the
// same token, never a new one, until the deadline. The token's scope is
// (namespace, region, parent): a job's spec fixes them, or every replica's
// Config must agree on the defaults.
//
// Lookup lists /v1/jobs with prefix <parent>/dispatch-<identity>- and a
// filter on DispatchIdempotencyToken, from the leader (not stale). Nomad
// forgets a token when it collects the child, job_gc_threshold (4 h by
// default) after it ended, or at once on `nomad system gc` or a purge;
// Config.MemoryHorizon, that less a margin, is the launcher's
// MemoryHorizon, and CheckGCThreshold refuses a server that forgets
// sooner.
//
// # Errors
//
// A *CallError is Permanent, and wraps launcher.ErrRejected, when Nomad
// refused the call: any 4xx but 408 and 429 (permission denied, token not
// found, bad request, not found, too large), and the 500s Job.Dispatch
// sends for a parent that is missing, stopped or not parameterized, or a
// payload or meta the parent does not accept. Anything else (no answer,
// 408, 429, other 5xx such as "No cluster leader") leaves the outcome
// unknown. A refused dispatch is still checked by Lookup before it is
// reported, since Nomad checks the parent, the ACL and the meta before
// the token: against a parent stopped after the child was made it answers
// a 500 "is stopped" although the child exists, and Dispatch returns that
// child.
//
// # What Nomad must allow
//
// The parent job must be a parameterized batch job that lists
// paxcron_identity, paxcron_job and paxcron_scheduled_at in meta_optional
// (Nomad refuses unknown meta keys). The ACL token needs dispatch-job,
// read-job and list-jobs in the jobs' namespaces, submit-job for Stop,
// and node:read or agent:read for CheckVersion (agent:read for
// CheckGCThreshold). Nomad 1.11.2 or later is required: before it one
// token could make several children.
package nomad
