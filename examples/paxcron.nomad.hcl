# paxcron itself, run by Nomad: three replicas, one per node, each with its
# own persistent data volume and a fixed replica ID.
#
# Before the first run:
#   - every node that may run a replica has a host volume "paxcron-data"
#     (client { host_volume "paxcron-data" { path = "/var/lib/paxcron" } })
#     and the paxcron binary at /usr/local/bin/paxcron;
#   - a Nomad variable holds the cluster key and the API tokens, and the
#     token paxcron dispatches with (dispatch-job, read-job, list-jobs):
#       nomad var put nomad/jobs/paxcron \
#         cluster_key="$(head -c 32 /dev/urandom | base64)" \
#         api_token="$(uuidgen)" nomad_token="<a Nomad ACL token>"
#
# The very first run starts a new cluster:
#   nomad job run -var bootstrap=true paxcron.nomad.hcl
# and every later run (updates, and a replica rescheduled onto an empty
# volume, which must rejoin as a learner) goes without it:
#   nomad job run paxcron.nomad.hcl
# Run it without the variable as soon as the cluster has a leader: a
# replica restarted while the job still says bootstrap=true refuses to
# start (exit 2) once its store holds state, rather than risk starting a
# voter that forgot its promises on a volume found empty.

variable "bootstrap" {
  type        = bool
  default     = false
  description = "true only for the first run of a new cluster"
}

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

job "paxcron" {
  type        = "service"
  datacenters = var.datacenters

  # One replica per node: a node's loss costs one replica.
  constraint {
    operator = "distinct_hosts"
    value    = "true"
  }

  # One replica at a time, so that a quorum always stays up.
  update {
    max_parallel     = 1
    min_healthy_time = "10s"
    healthy_deadline = "2m"
  }

  dynamic "group" {
    for_each = [1, 2, 3]
    labels   = ["replica-${group.value}"]

    content {
      count = 1

      network {
        port "http" { static = 4750 }
        port "paxos" { static = 4751 }
      }

      volume "data" {
        type      = "host"
        source    = "paxcron-data"
        read_only = false
      }

      service {
        name     = "paxcron-replica-${group.value}"
        provider = "nomad"
        port     = "paxos"
      }

      service {
        name     = "paxcron-api"
        provider = "nomad"
        port     = "http"
        tags     = ["replica-${group.value}"]

        check {
          type     = "tcp"
          interval = "10s"
          timeout  = "2s"
        }
      }

      restart {
        attempts = 10
        interval = "5m"
        delay    = "5s"
        mode     = "delay"
      }

      task "paxcron" {
        driver = "exec"

        config {
          command = "/usr/local/bin/paxcron"
          args    = concat(["server", "-config", "${NOMAD_TASK_DIR}/server.hcl"], var.bootstrap ? ["-bootstrap"] : [])
        }

        # SIGTERM: a leader drains its launches and hands over first.
        kill_signal  = "SIGTERM"
        kill_timeout = "45s"

        volume_mount {
          volume      = "data"
          destination = "/var/lib/paxcron"
        }

        template {
          destination = "secrets/cluster.key"
          perms       = "0400"
          data        = "{{ with nomadVar \"nomad/jobs/paxcron\" }}{{ .cluster_key }}{{ end }}"
        }

        template {
          destination = "secrets/env"
          env         = true
          data        = <<-EOT
            {{ with nomadVar "nomad/jobs/paxcron" }}
            PAXCRON_API_WRITE_TOKENS={{ .api_token }}
            NOMAD_TOKEN={{ .nomad_token }}
            {{ end }}
          EOT
        }

        template {
          destination = "local/server.hcl"
          data        = <<-EOT
            replica_id = ${group.value}
            data_dir   = "/var/lib/paxcron"

            cluster {
              members  = [1, 2, 3]
              key_file = "{{ env "NOMAD_SECRETS_DIR" }}/cluster.key"
              peers = [
              {{- range $i := loop 1 4 }}{{ if ne $i ${group.value} }}{{ range nomadService (printf "paxcron-replica-%d" $i) }}
                "{{ $i }}={{ .Address }}:{{ .Port }}/{{ .Address }}:4750",
              {{- end }}{{ end }}{{ end }}
              ]
            }

            bind {
              http  = "0.0.0.0:4750"
              paxos = "0.0.0.0:4751"
            }

            advertise {
              http  = "{{ env "NOMAD_IP_http" }}:4750"
              paxos = "{{ env "NOMAD_IP_paxos" }}:4751"
            }

            nomad {
              # The Nomad agent on this node.
              address = "http://{{ env "attr.unique.network.ip-address" }}:4646"
            }

            log {
              format = "json"
            }
          EOT
          # A replica that moved: its peers learn its new address.
          change_mode = "restart"
        }

        resources {
          cpu    = 500
          memory = 512
        }
      }
    }
  }
}
