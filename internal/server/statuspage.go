package server

import (
	"cmp"
	"context"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/schedule"
	"paxcron/cron/state"
	"paxcron/internal/api"
	"paxcron/paxos"
)

// Status page bounds: the page stays small whatever the cluster holds.
const (
	pageJobsMax     = 200
	pageLaunchesMax = 50
	recentMax       = 200
)

// recentLaunches keeps the last launches this replica applied as
// finished, newest last, for the status page.
type recentLaunches struct {
	mu sync.Mutex
	ls []api.Launch
}

func (r *recentLaunches) add(c state.LaunchFinished) {
	l := api.Launch{
		Job: c.Job, Identity: state.LaunchIdentity(c.Job, c.ScheduledAt, c.LaunchKind), ScheduledAt: c.ScheduledAt.UTC(),
		Outcome: string(c.Outcome.Kind), ChildID: c.Outcome.ChildID, Reason: c.Outcome.Reason,
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ls) == recentMax {
		copy(r.ls, r.ls[1:])
		r.ls = r.ls[:recentMax-1]
	}
	r.ls = append(r.ls, l)
}

func (r *recentLaunches) newest(n int) []api.Launch {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.ls[max(0, len(r.ls)-n):])
	slices.Reverse(out)
	return out
}

// pageData is what the status page shows.
type pageData struct {
	Status    api.Status
	Jobs      []api.JobSummary
	JobsTotal int
	Launches  []api.Launch
	Now       time.Time
	Problems  int // unknown or failed among Launches
	Ended     int // ended among Jobs
}

// tally counts what the page warns of: the problems among the launches
// and the ended among the jobs.
func (d *pageData) tally() {
	for _, l := range d.Launches {
		if l.Outcome == "unknown" || l.Outcome == "failed" {
			d.Problems++
		}
	}
	for _, j := range d.Jobs {
		if j.Ended {
			d.Ended++
		}
	}
}

func (s *Server) handleStatusPage(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	if err := s.authorize(r, false); err != nil {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_ = pageTemplate.ExecuteTemplate(w, "unauthorized", nil)
		return
	}
	st, err := s.handleStatus(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	d := pageData{Status: st.(api.Status), Now: time.Now().UTC()}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	err = s.node.Cron(ctx, func(l *launcher.Launcher) {
		m := l.Machine()
		page, _ := m.JobsPage("", "", pageJobsMax)
		d.JobsTotal = m.JobCount()
		for _, j := range page {
			d.Jobs = append(d.Jobs, summaryOf(j))
		}
		d.Launches = s.recent.newest(pageLaunchesMax)
		if len(d.Launches) == 0 {
			// Nothing finished since this replica started: show the
			// newest the listed jobs remember.
			for _, j := range page {
				for _, h := range j.History {
					d.Launches = append(d.Launches, api.LaunchOf(h))
				}
			}
			slices.SortFunc(d.Launches, func(a, b api.Launch) int { return b.ScheduledAt.Compare(a.ScheduledAt) })
			d.Launches = d.Launches[:min(len(d.Launches), pageLaunchesMax)]
		}
	})
	if err != nil {
		writeError(w, err)
		return
	}
	d.tally()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := pageTemplate.ExecuteTemplate(w, "page", d); err != nil {
		s.log.Warn("rendering the status page", "err", err)
	}
}

var pageTemplate = template.Must(template.New("").Funcs(template.FuncMap{
	"searchYears": func() int { return schedule.SearchYears },
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"whenp": func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"dur":  func(d api.Duration) string { return time.Duration(d).Round(time.Millisecond).String() },
	"lead": func(id uint64) bool { return id != uint64(paxos.None) },
	"join": strings.Join,
	"sortedReplicas": func(rs []api.Replica) []api.Replica {
		out := slices.Clone(rs)
		slices.SortFunc(out, func(a, b api.Replica) int { return cmp.Compare(a.ID, b.ID) })
		return out
	},
}).Parse(pageHTML))

const pageHTML = `{{define "page"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<title>paxcron replica {{.Status.Replica}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d232a;background:#f6f7f9}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
.sub{color:#5b6570;margin-bottom:16px}
.cards{display:flex;gap:12px;flex-wrap:wrap}
.card{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:10px 14px;min-width:150px}
.card b{display:block;font-size:18px}.card span{color:#5b6570;font-size:12px;text-transform:uppercase;letter-spacing:.04em}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #dde1e6;border-radius:8px;overflow:hidden}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid #eef0f3;font-size:13px;vertical-align:top}
th{background:#eef1f5;font-weight:600}
code{font:12px ui-monospace,Menlo,monospace}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600}
.dispatched{background:#dcf5e3;color:#15622e}.open{background:#e4ecfb;color:#1c4796}
.skipped{background:#ffe9c7;color:#8a4b00}.failed{background:#fde0e0;color:#9c1c1c}
.unknown{background:#9c1c1c;color:#fff}.paused{background:#e8e8e8;color:#444}.ended{background:#fde0e0;color:#9c1c1c}
.alive,.self{color:#15622e}.suspect{color:#9c1c1c;font-weight:600}.unknownh{color:#8a4b00}
tr.attention td{background:#fff6f6}tr.notice td{background:#fffaf0}
.warn{background:#fff3cd;border:1px solid #f0d68a;padding:8px 12px;border-radius:6px;margin-top:12px}
</style></head><body>
<h1>paxcron — replica {{.Status.Replica}} ({{.Status.Role}})</h1>
<div class="sub">As this replica sees it at {{when .Now}}; refreshes every 5 s. Version {{.Status.Version}}. Cluster ID {{if .Status.ClusterID}}<code>{{.Status.ClusterID}}</code>{{else}}not known yet{{end}}.</div>
<div class="cards">
<div class="card"><span>Leader</span><b>{{if lead .Status.Leader}}replica {{.Status.Leader}}{{else}}none{{end}}</b></div>
<div class="card"><span>Launching here</span><b>{{if .Status.Launching}}yes, lease {{dur .Status.Lease}}{{else}}no{{end}}</b></div>
<div class="card"><span>Log</span><b>chosen {{.Status.Chosen}} · applied {{.Status.Applied}}</b></div>
<div class="card"><span>Snapshot</span><b>{{if .Status.LastSnapshot}}at {{.Status.LastSnapshot}}{{else}}none yet{{end}}</b></div>
<div class="card"><span>Backup</span><b>{{with .Status.LastBackup}}at {{.Index}} (generation {{.Generation}}), {{when .TakenAt}}{{else}}none{{end}}</b></div>
<div class="card"><span>Jobs</span><b>{{.Status.Jobs}} · {{.Status.Open}} open</b></div>
</div>
{{if .Status.Rebuilding}}<div class="warn">This replica lost its disk and is catching up from its peers: it votes again once it cannot contradict what it forgot.</div>{{end}}
{{if not (lead .Status.Leader)}}<div class="warn">No leader: nothing is launched until a majority of replicas elect one.</div>{{end}}
{{range .Status.SettingsDiffer}}<div class="warn">Replica {{.Replica}}'s {{join .Settings ", "}} differ from this replica's: only the leader backs up and launches, so where depends on which replica leads. Give every replica the same (during a rolling change of them, this is expected until the last replica restarts).</div>{{end}}
{{if .Ended}}<div class="warn">{{.Ended}} of the jobs listed below ended: their schedules have no launch within {{searchYears}} years of their last, so they launch nothing more until their schedules are edited.</div>{{end}}
{{if .Problems}}<div class="warn">{{.Problems}} of the recent launches failed or have an unknown outcome: see below, and check those jobs in Nomad.</div>{{end}}
<h2>Replicas</h2>
<table><tr><th>ID</th><th>Health</th><th>API</th><th>Paxos</th></tr>
{{range sortedReplicas .Status.Replicas}}<tr><td>{{.ID}}</td><td class="{{if eq .Health "unknown"}}unknownh{{else}}{{.Health}}{{end}}">{{.Health}}</td><td><code>{{.APIAddr}}</code></td><td><code>{{.PaxosAddr}}</code></td></tr>{{end}}
</table>
<h2>Jobs{{if gt .JobsTotal (len .Jobs)}} (the first {{len .Jobs}} of {{.JobsTotal}}: paxcron job status lists all){{end}}</h2>
<table><tr><th>Name</th><th>Schedule</th><th>Zone</th><th>Next launch</th><th>Last launch</th><th>Outcome</th><th>Open</th></tr>
{{range .Jobs}}<tr{{with .Last}}{{if or (eq .Outcome "unknown") (eq .Outcome "failed")}} class="attention"{{else if eq .Outcome "skipped"}} class="notice"{{end}}{{end}}>
<td><b>{{.Name}}</b>{{if .Ended}} <span class="badge ended">ended</span>{{else if .Paused}} <span class="badge paused">paused</span>{{end}}</td><td><code>{{.Resolved}}</code></td><td>{{.TimeZone}}</td>
<td>{{whenp .NextAt}}</td><td>{{with .Last}}{{when .ScheduledAt}}{{else}}-{{end}}</td>
<td>{{with .Last}}<span class="badge {{.Outcome}}">{{.Outcome}}</span>{{else}}-{{end}}</td><td>{{.Open}}</td></tr>
{{else}}<tr><td colspan="7">No job yet: submit one with <code>paxcron job run FILE.hcl</code>.</td></tr>{{end}}
</table>
<h2>Recent launches</h2>
<table><tr><th>Scheduled</th><th>Job</th><th>Outcome</th><th>Nomad child, or why</th></tr>
{{range .Launches}}<tr{{if or (eq .Outcome "unknown") (eq .Outcome "failed")}} class="attention"{{else if eq .Outcome "skipped"}} class="notice"{{end}}>
<td>{{when .ScheduledAt}}</td><td>{{.Job}}</td><td><span class="badge {{.Outcome}}">{{.Outcome}}</span></td>
<td>{{if .ChildID}}<code>{{.ChildID}}</code>{{end}}{{if .Reason}} {{.Reason}}{{end}}</td></tr>
{{else}}<tr><td colspan="4">No launch finished yet.</td></tr>{{end}}
</table>
</body></html>{{end}}
{{define "unauthorized"}}<!doctype html><html lang="en"><head><meta charset="utf-8"><title>paxcron: token needed</title></head>
<body style="font:15px system-ui,sans-serif;margin:40px"><h1>A token is needed</h1>
<p>This replica requires an API token for reads. To show this page in a browser, set
<code>api { anonymous_reads = true }</code> in the server's configuration (or put the page behind a proxy that adds the
<code>Authorization: Bearer</code> header). The CLI reads the same information: <code>paxcron operator status</code>,
<code>paxcron job status</code>.</p></body></html>{{end}}`
