// Package scalebench measures a replica at issue 6's scale: a three-replica
// cluster in one process (internal/node replicas over an in-process
// transport, each on its own Pebble store on the real disk) holding a
// million cron jobs while a steady flow of launches (10,000 a minute by
// default) goes to a fake Nomad that answers after a small latency.
//
// Run builds the jobs with the cron state's own API, writes the snapshot
// into each replica's empty store (as `paxcron operator snapshot restore`
// does), starts the replicas from their disks, waits for the launches to
// settle, and then measures: the leader's CPU (the replicas' goroutines are
// labelled by node, so a CPU profile splits the process's time by replica),
// launches per minute and their lateness, memory per replica (the process
// divided by three, and one follower's share measured by removing it), a
// snapshot taken by the leader (size, time until durable), and the restart
// of a follower from its disk until it has caught up.
//
// It lives outside the test files so that a test can run it at a small
// size and check what it computes; BenchmarkScaleCluster runs it at full
// size and writes the Markdown report and the CPU plot.
package scalebench
