# One paxcron replica's configuration (replica 1 of 3). Every setting can
# also be given as a flag (-bind-http ...) or a variable (PAXCRON_BIND_HTTP
# ...); see `paxcron server -h`. Start the three replicas of a new cluster
# once with -bootstrap; later starts (and a replica whose disk was lost)
# go without it.

replica_id = 1
data_dir   = "/var/lib/paxcron"

cluster {
  members  = [1, 2, 3]
  # 16 bytes or more, the same file on every replica:
  #   head -c 32 /dev/urandom | base64 > /etc/paxcron/cluster.key
  key_file = "/etc/paxcron/cluster.key"
  # While the key is changed, the keys also accepted from other replicas
  # (README.md, "Day-two operations"):
  # accept_key_files = ["/etc/paxcron/cluster.key.old"]
  # The replicas find one another by gossip: where to join it.
  join = ["10.0.0.12:4752", "10.0.0.13:4752"]
  # Or, without gossip, where the others are (Paxos and API addresses):
  # peers = ["2=10.0.0.12:4751/10.0.0.12:4750", "3=10.0.0.13:4751/10.0.0.13:4750"]
}

bind {
  http   = "0.0.0.0:4750" # the API, /metrics and the status page
  paxos  = "0.0.0.0:4751" # replica-to-replica
  gossip = "0.0.0.0:4752" # membership (UDP and TCP)
}

advertise {
  http   = "10.0.0.11:4750"
  paxos  = "10.0.0.11:4751"
  gossip = "10.0.0.11:4752"
}

# Mutual TLS between replicas, and TLS for the API (all three or none).
# The certificate must name the advertised hosts and be for both server
# and client authentication; ca_file may hold several CAs (a CA move).
# Files are read at start and on SIGHUP (kill -HUP, systemd's ExecReload,
# or a Nomad template's change_mode = "signal"): renewing a certificate
# needs no restart, nor does a CA move: both CAs in every ca_file, then
# the new certificates, then the new CA alone, each step a SIGHUP to
# every replica.
# tls {
#   ca_file   = "/etc/paxcron/ca.pem"
#   cert_file = "/etc/paxcron/replica-1.pem"
#   key_file  = "/etc/paxcron/replica-1-key.pem"
# }

api {
  write_tokens    = ["replace-with-a-long-random-token"]
  read_tokens     = []
  anonymous_reads = false # true lets a browser open the status page
  enable_pprof    = false # true serves Go's profiles at /debug/pprof/ to a write token
}

nomad {
  address      = "http://127.0.0.1:4646" # or NOMAD_ADDR; NOMAD_TOKEN etc. are read too
  gc_threshold = "4h"                    # the Nomad servers' job_gc_threshold
}

snapshot {
  every_entries = 10000
  every         = "10m" # a multiple of 50ms, the replica's tick
}

# The leader uploads each snapshot here, keeping the newest 5 (and the
# cluster's first backup there, its claim on the target). By default
# a folder beside the store (file://<data_dir>/backups), which guards a
# damaged store but not a lost disk: point it at another machine's storage.
backup {
  url  = "s3://paxcron-backups/prod?region=eu-central-1"
  keep = 5
}

log {
  level  = "info"
  format = "json"
}
