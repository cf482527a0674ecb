package chaos

import (
	"fmt"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"paxcron/internal/api"
	"paxcron/nomad"
)

// The parameterized parents in Nomad.
const (
	// QuickParent's group has no task to place (count 0): a dispatch makes
	// a child job, with its token, and no allocation, so that fifty jobs
	// firing every few seconds do not start a process each on a 2-core
	// machine. The allow jobs dispatch it.
	QuickParent = "chaos-quick"
	// SlowParent runs one task that sleeps SlowTaskSeconds: longer than
	// the shortest periods, so that the forbid and replace policies meet
	// a child still running. Their periods (10-30 s) keep the
	// allocations to about one a second: each starts two processes.
	SlowParent      = "chaos-slow"
	SlowTaskSeconds = 12
)

// DefaultCatchupWindow is paxcron's default catch-up window (README),
// which the workload names in each spec that wants it.
const DefaultCatchupWindow = 5 * time.Minute

// workloadZones are the zones some of the workload's jobs run in.
var workloadZones = []string{"Asia/Kolkata", "Australia/Lord_Howe", "America/St_Johns"}

// WorkloadJob is one cron job of the workload.
type WorkloadJob struct {
	Name         string
	EverySeconds int64
	Spec         api.Spec
}

// Workload is n cron jobs (n >= 4) with a mix of periods and policies:
// about 60% concurrency allow on the quick parent (some at-least-once,
// some with a 15 s catch-up window that a long fault outlasts, some in
// time zones), 20% forbid and 20% replace on the slow parent.
func Workload(n int) []WorkloadJob {
	if n < 4 {
		panic(fmt.Sprintf("chaos: a workload of %d jobs: want at least 4", n))
	}
	var jobs []WorkloadJob
	forbid, replace := n/5, n/5
	allow := n - forbid - replace
	quick := []int64{5, 6, 10, 12, 15, 20}
	slow := []int64{10, 15, 20, 30}
	for i := range allow {
		every := quick[i%len(quick)]
		spec := api.Spec{Schedule: fmt.Sprintf("*/%d * * * * *", every), NomadJob: QuickParent,
			Meta: map[string]string{"chaos": "allow"}}
		// The default window, named so that the checker knows it.
		spec.CatchupWindow = api.Duration(DefaultCatchupWindow)
		switch i % 3 {
		case 1:
			spec.Delivery = "at-least-once"
		case 2:
			spec.CatchupWindow = api.Duration(15 * time.Second)
		}
		// Some in zones of odd offsets: the replicas' images have no zone
		// database of their own (FROM scratch), so each must read the one
		// in its binary. Every zone's offset is whole minutes, so a
		// seconds cadence keeps its slots.
		if i%4 == 3 {
			spec.TimeZone = workloadZones[(i/4)%len(workloadZones)]
		}
		jobs = append(jobs, WorkloadJob{Name: fmt.Sprintf("chaos-allow-%02d", i+1), EverySeconds: every, Spec: spec})
	}
	for i := range forbid + replace {
		policy, k := "forbid", i
		if i >= forbid {
			policy, k = "replace", i-forbid
		}
		every := slow[k%len(slow)]
		jobs = append(jobs, WorkloadJob{Name: fmt.Sprintf("chaos-%s-%02d", policy, k+1), EverySeconds: every, Spec: api.Spec{
			Schedule: fmt.Sprintf("*/%d * * * * *", every), NomadJob: SlowParent, Concurrency: policy,
			CatchupWindow: api.Duration(DefaultCatchupWindow),
			Meta:          map[string]string{"chaos": policy},
		}})
	}
	return jobs
}

// parents are the two parameterized jobs, accepting paxcron's meta keys
// and the workload's own.
func parents() []*nomadapi.Job {
	quick := parent(QuickParent, 0, nomadapi.NewTask("t", "raw_exec").SetConfig("command", "/bin/true"))
	slow := parent(SlowParent, 1, nomadapi.NewTask("t", "raw_exec").
		SetConfig("command", "/bin/sleep").SetConfig("args", []string{fmt.Sprint(SlowTaskSeconds)}))
	return []*nomadapi.Job{quick, slow}
}

func parent(name string, count int, task *nomadapi.Task) *nomadapi.Job {
	j := nomadapi.NewBatchJob(name, name, "global", 50)
	j.Datacenters = []string{"*"}
	j.ParameterizedJob = &nomadapi.ParameterizedJobConfig{Payload: "optional", MetaOptional: append(nomad.MetaKeys(), "chaos")}
	task.Require(&nomadapi.Resources{CPU: new(20), MemoryMB: new(16)})
	tg := nomadapi.NewTaskGroup("g", count).AddTask(task)
	tg.RestartPolicy = &nomadapi.RestartPolicy{Attempts: new(0), Mode: new("fail")}
	tg.ReschedulePolicy = &nomadapi.ReschedulePolicy{Attempts: new(0), Unlimited: new(false)}
	j.AddTaskGroup(tg)
	return j
}
