package server

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paxcron/internal/api"
)

// chromium finds Debian's headless browser, or skips.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH: the status page is tested in headless Chromium (apt-get install chromium; .ci/run installs it)")
	return ""
}

func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(), "--window-size=1280,1100"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errOut.String())
	}
	return out.Bytes()
}

// The status page in a real browser: the jobs, the replicas and the
// recent launches, with failed and skipped ones standing out in colour.
func TestStatusPageInChromium(t *testing.T) {
	bin := chromium(t)
	c := startClusterWith(t, func(cfg *Config) { cfg.AnonymousReads = true })
	leader := c.leader()
	ctx := context.Background()
	w := c.client(leader, writeToken)
	put := api.PutJobs{SkipNomadCheck: true, Jobs: []api.PutJob{
		{Name: "nightly-report", Spec: api.Spec{Schedule: "* * * * * *", NomadJob: "report"}},
		{Name: "broken-parent", Spec: api.Spec{Schedule: "* * * * * *", NomadJob: "missing"}},
		{Name: "held", Spec: api.Spec{Schedule: "* * * * * *", NomadJob: "report"}},
	}}
	if _, err := w.PutJobs(ctx, put); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Pause(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a failed and a skipped launch", func() bool {
		jobs, err := w.Jobs(ctx, api.ReadOptions{})
		if err != nil {
			return false
		}
		seen := map[string]bool{}
		for _, j := range jobs.Jobs {
			if j.Last != nil {
				seen[j.Last.Outcome] = true
			}
		}
		return seen["failed"] && seen["skipped"] && seen["dispatched"]
	})
	// Under load (CI, -race) leadership may move while the launches
	// accumulate: render the page of the replica leading now, and again
	// if it moved while Chromium rendered it, or if the page caught it
	// between a lapse and its next election (seen once in CI: the page
	// rendered without "(leader)", the replica leading before and after).
	var url, dom, title string
	for range 5 {
		leader = c.leader()
		url = "http://" + c.servers[leader-1].HTTPAddr() + "/"
		title = "replica " + string(rune('0'+leader)) + " (leader)"
		dom = string(runChromium(t, bin, "--dump-dom", url))
		if c.leader() == leader && strings.Contains(dom, title) {
			break
		}
	}
	for _, want := range []string{title, "nightly-report", "broken-parent",
		`class="badge failed"`, `class="badge skipped"`, `class="badge dispatched"`, `class="badge paused"`, "Recent launches", `<td class="alive">alive</td>`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}

	shot := filepath.Join(os.TempDir(), "paxcron-status-page-"+time.Now().Format("20060102-150405")+".png")
	runChromium(t, bin, "--screenshot="+shot, url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the status page: %s (%dx%d)", shot, img.Bounds().Dx(), img.Bounds().Dy())
	// The failed badge's red text and the skipped badge's amber fill are
	// there as colours, not only as class names.
	for name, want := range map[string]color.RGBA{
		"failed text (#9c1c1c)":     {0x9c, 0x1c, 0x1c, 0xff},
		"skipped fill (#ffe9c7)":    {0xff, 0xe9, 0xc7, 0xff},
		"dispatched fill (#dcf5e3)": {0xdc, 0xf5, 0xe3, 0xff},
	} {
		if n := countColour(img, want); n < 20 {
			t.Errorf("the screenshot has %d pixels of the %s", n, name)
		}
	}
}

func countColour(img image.Image, want color.RGBA) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(r, want.R) && near(g, want.G) && near(bl, want.B) {
				n++
			}
		}
	}
	return n
}

func near(v uint32, c uint8) bool {
	d := int(v>>8) - int(c)
	return d >= -3 && d <= 3
}

func TestStatusPageNeedsTokenWithoutAnonymousReads(t *testing.T) {
	c := startCluster(t)
	leader := c.leader()
	resp := httpDo(t, "GET", "http://"+c.servers[leader-1].HTTPAddr()+"/", "", "", nil)
	if resp.code != 401 || !strings.Contains(resp.body, "anonymous_reads") {
		t.Fatalf("%d %s", resp.code, resp.body)
	}
}

// An unknown outcome, which no fake Nomad here produces, renders as the
// loudest badge.
func TestStatusPageTemplateUnknown(t *testing.T) {
	var b bytes.Buffer
	d := pageData{Status: api.Status{Replica: 1, Role: "leader", Leader: 1}, Launches: []api.Launch{
		{Job: "payroll", Outcome: "unknown", Reason: "open longer than Nomad remembers a dispatch"},
	}, Problems: 1}
	if err := pageTemplate.ExecuteTemplate(&b, "page", d); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<tr class="attention">`, `class="badge unknown">unknown</span>`, "1 of the recent launches failed or have an unknown outcome"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// A peer whose shared settings differ is a warning on the page, naming
// the replica and the settings.
func TestStatusPageTemplateSettingsDiffer(t *testing.T) {
	var b bytes.Buffer
	d := pageData{Status: api.Status{Replica: 1, Role: "leader", Leader: 1, SettingsCompared: true,
		SettingsDiffer: []api.SettingsDiffer{{Replica: 3, Settings: []string{"backup.url", "nomad.namespace"}}}}}
	if err := pageTemplate.ExecuteTemplate(&b, "page", d); err != nil {
		t.Fatal(err)
	}
	if want := `<div class="warn">Replica 3's backup.url, nomad.namespace differ from this replica's`; !strings.Contains(b.String(), want) {
		t.Errorf("page lacks %q:\n%s", want, b.String())
	}
}

// A job whose schedule ended wears a badge and is a warning on the page:
// it looked like any other, with no next launch.
func TestStatusPageTemplateEnded(t *testing.T) {
	var b bytes.Buffer
	d := pageData{Status: api.Status{Replica: 1, Role: "leader", Leader: 1}, Jobs: []api.JobSummary{
		{Name: "leap", Resolved: "0 0 0 * 2 MON#5", Ended: true, Paused: true},
		{Name: "held", Resolved: "0 * * * * *", Paused: true},
	}}
	d.tally()
	if err := pageTemplate.ExecuteTemplate(&b, "page", d); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<b>leap</b> <span class="badge ended">ended</span>`, `<b>held</b> <span class="badge paused">paused</span>`,
		"1 of the jobs listed below ended"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
