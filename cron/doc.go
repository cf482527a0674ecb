// Package cron owns paxcron's cron layer. For now it holds the deterministic
// glue that drives one replica (cron/replica); the schedule language, the
// replicated cron state machine and the launch protocol arrive with issue 3.
package cron
