// Package chaos owns paxcron's real-cluster chaos test (`make chaos`,
// cmd/paxcron-chaos): three `paxcron server` replicas in containers built
// FROM scratch, on docker networks of their own, launching into a real
// Nomad agent on the host, under a seeded fault schedule (crashes, a
// paused leader, partitions, a clock jump, a lost disk, Nomad restarted);
// then an independent checker that proves from Nomad's own job list and
// paxcron's recorded launches that no slot got two children, every slot
// got a child or a recorded skip that its job's policy, the faults and
// Nomad's view justify, no forbid or replace job had two children at
// once, and launches were on time outside the fault windows.
//
// The pure parts, the schedule (schedule.go) and the checker (check.go),
// take no clock and start nothing, so that their tests plant violations
// and replay schedules. The harness (docker.go, nomad.go, cluster.go,
// run.go) drives the docker CLI through os/exec, not the Docker SDK, and
// sends traffic only to loopback and to the networks it creates.
package chaos
