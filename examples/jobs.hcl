# Cron jobs for paxcron. Check them with:
#
#   paxcron job validate examples/jobs.hcl
#
# Each cron block dispatches a parameterized Nomad job. The launch identity
# (<cron name>-<scheduled unix seconds>) is the dispatch's idempotency token,
# so a launch reaches Nomad once whatever fails.

# Every night at 01:?? Berlin time; ? picks a minute by hashing the name, so
# that a thousand nightly jobs do not all start in the same minute.
cron "nightly-report" {
  schedule       = "? 1 * * *"
  time_zone      = "Europe/Berlin"
  concurrency    = "forbid"  # skip a night while the last report still runs
  catchup_window = "30m"     # launched late after an outage of up to 30 minutes

  nomad {
    job       = "report"     # a parameterized batch job in Nomad
    namespace = "default"
    meta      = { kind = "nightly" }
    payload   = file("params.json")
  }
}

# Every five minutes, replacing a run that is still going.
cron "cache-warm" {
  schedule    = "*/5 * * * *"
  concurrency = "replace"

  nomad {
    job     = "cache-warmer"
    payload = jsonencode({ depth = 2 })
  }
}
